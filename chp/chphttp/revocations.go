package chphttp

import (
	"errors"
	"net/http"

	"github.com/capmesh/capmesh/chp/boundary/mandates"
)

// getRevocations serves GET /revocations: the revocation set the host holds,
// {keys, mandates} (chp-http-binding.md §4, chp-v0.2.md §10).
func (h *binding) getRevocations(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.b.Revocations())
}

// postRevocation serves POST /revocations: a mandate-revocation statement,
// verified before it is kept (400 invalid_revocation otherwise — an
// unverifiable statement is never stored). Over HTTP the poster is a peer,
// never the operator: it may only revoke a mandate this host has seen
// issued under the statement's key (403 not_issuer), within the
// per-issuer and global bounds (507 issuer_quota_exceeded,
// revocations_full).
func (h *binding) postRevocation(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	a, err := h.b.AcceptRevocation(body, false)
	switch {
	case errors.Is(err, mandates.ErrBadRevocation):
		httpError(w, http.StatusBadRequest, "invalid_revocation", err.Error())
	case errors.Is(err, mandates.ErrNotIssuer):
		httpError(w, http.StatusForbidden, "not_issuer", err.Error())
	case errors.Is(err, mandates.ErrIssuerQuota):
		httpError(w, http.StatusInsufficientStorage, "issuer_quota_exceeded", err.Error())
	case errors.Is(err, mandates.ErrTooManyRevocations):
		httpError(w, http.StatusInsufficientStorage, "revocations_full", err.Error())
	case err != nil:
		httpError(w, http.StatusInternalServerError, "revocation_unavailable", err.Error())
	default:
		writeJSON(w, http.StatusOK, a)
	}
}
