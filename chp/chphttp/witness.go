package chphttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/chp/witnessing"
)

// witnessRoutes mounts witnessing (chp-v0.2.md §12), all authed: GET /head
// [?scheme=], POST /witness, GET /witnesses, POST and GET /anchors, the
// chp-store-head-v2 proofs GET /head/inclusion/{id} and GET
// /head/consistency?first=&second=, and the Merkle event log GET
// /log/head[?tree_size=], GET /log/inclusion?sequence=[&tree_size=] and
// GET /log/consistency?first=&second= (docs/witnessing.md).
func (h *binding) witnessRoutes(mux *http.ServeMux) {
	b := h.b
	mux.HandleFunc("GET /head", h.authed(func(w http.ResponseWriter, r *http.Request) {
		head, err := b.Head(r.Context(), r.URL.Query().Get("scheme"))
		respond(w, head, err)
	}))
	mux.HandleFunc("GET /head/inclusion/{corr...}", h.authed(func(w http.ResponseWriter, r *http.Request) {
		head, proof, err := b.HeadInclusion(r.Context(), r.PathValue("corr"))
		if err != nil {
			respond(w, nil, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"host_id": head.HostID, "scheme": head.Scheme,
			"sequence": head.Sequence, "store_head": head.StoreHead, "proof": proof})
	}))
	mux.HandleFunc("GET /head/consistency", h.authed(func(w http.ResponseWriter, r *http.Request) {
		first, second, ok := twoUints(w, r, "first", "second", false)
		if ok {
			p, err := b.HeadConsistency(r.Context(), first, second)
			respond(w, p, err)
		}
	}))
	mux.HandleFunc("POST /witness", h.authed(func(w http.ResponseWriter, r *http.Request) {
		body, ok := h.readBody(w, r)
		if !ok {
			return
		}
		st, err := b.AcceptWitness(r.Context(), body)
		if err != nil {
			respond(w, nil, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"accepted": true, "host_id": st.HostID,
			"sequence": st.Sequence, "store_head": st.StoreHead, "witness": st.Witness.HostID})
	}))
	mux.HandleFunc("GET /witnesses", h.authed(func(w http.ResponseWriter, r *http.Request) {
		ws, err := b.Witnesses(r.Context())
		respond(w, map[string]any{"witnesses": nonNil(ws)}, err)
	}))
	mux.HandleFunc("POST /anchors", h.authed(func(w http.ResponseWriter, r *http.Request) {
		body, ok := h.readBody(w, r)
		if !ok {
			return
		}
		a, err := b.AcceptAnchor(r.Context(), body)
		if err != nil {
			respond(w, nil, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"accepted": true, "host_id": a.HostID,
			"sequence": a.Sequence, "store_head": a.StoreHead, "did": a.Anchor.DID})
	}))
	mux.HandleFunc("GET /anchors", h.authed(func(w http.ResponseWriter, r *http.Request) {
		as, err := b.Anchors(r.Context())
		respond(w, map[string]any{"anchors": nonNil(as)}, err)
	}))
	mux.HandleFunc("GET /log/head", h.authed(func(w http.ResponseWriter, r *http.Request) {
		size, ok := optUint(w, r, "tree_size")
		if ok {
			head, err := b.LogHead(r.Context(), size)
			respond(w, head, err)
		}
	}))
	mux.HandleFunc("GET /log/inclusion", h.authed(func(w http.ResponseWriter, r *http.Request) {
		seq, size, ok := twoUints(w, r, "sequence", "tree_size", true)
		if ok {
			p, err := b.LogInclusion(r.Context(), seq, size)
			respond(w, p, err)
		}
	}))
	mux.HandleFunc("GET /log/consistency", h.authed(func(w http.ResponseWriter, r *http.Request) {
		first, second, ok := twoUints(w, r, "first", "second", true)
		if ok {
			p, err := b.LogConsistency(r.Context(), first, second)
			respond(w, p, err)
		}
	}))
}

func nonNil(v []json.RawMessage) []json.RawMessage {
	if v == nil {
		return []json.RawMessage{}
	}
	return v
}

// optUint reads an optional unsigned query parameter (absent: 0).
func optUint(w http.ResponseWriter, r *http.Request, name string) (uint64, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad_request", name+" must be a non-negative integer")
		return 0, false
	}
	return n, true
}

// twoUints reads the query parameters a (required) and b (required unless
// bOptional).
func twoUints(w http.ResponseWriter, r *http.Request, a, b string, bOptional bool) (uint64, uint64, bool) {
	if r.URL.Query().Get(a) == "" || (!bOptional && r.URL.Query().Get(b) == "") {
		httpError(w, http.StatusBadRequest, "bad_request", "query parameters "+a+" and "+b+" are required")
		return 0, 0, false
	}
	x, ok := optUint(w, r, a)
	if !ok {
		return 0, 0, false
	}
	y, ok := optUint(w, r, b)
	return x, y, ok
}

// respond writes v, or maps a witnessing error to its status and code.
func respond(w http.ResponseWriter, v any, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.Is(err, witnessing.ErrInvalidWitness):
		httpError(w, http.StatusBadRequest, "invalid_witness", err.Error())
	case errors.Is(err, evlog.ErrRevocationHeadMismatch):
		httpError(w, http.StatusConflict, "revocation_head_mismatch", err.Error())
	case errors.Is(err, evlog.ErrHeadMismatch):
		httpError(w, http.StatusConflict, "head_mismatch", err.Error())
	case errors.Is(err, evlog.ErrBadQuery), errors.Is(err, evlog.ErrBadSequence):
		httpError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, evlog.ErrUnknownCorrelation):
		httpError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, evlog.ErrUnsigned), errors.Is(err, evlog.ErrNoHead):
		httpError(w, http.StatusNotImplemented, "not_supported", err.Error())
	case errors.Is(err, evlog.ErrIssuerQuota):
		httpError(w, http.StatusInsufficientStorage, "issuer_quota_exceeded", err.Error())
	case errors.Is(err, evlog.ErrWitnessStoreFull):
		httpError(w, http.StatusInsufficientStorage, "sidecar_full", err.Error())
	default:
		httpError(w, http.StatusInternalServerError, "evidence_unavailable", err.Error())
	}
}
