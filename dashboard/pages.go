package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
)

// callTimeout bounds one call to the node for a page.
const callTimeout = 15 * time.Second

// provider is one row of the registry table, as ipc.list reports it.
type provider struct {
	Name         string    `json:"primal_id"`
	Key          string    `json:"key"`
	Capabilities []string  `json:"capabilities"`
	Endpoint     string    `json:"endpoint"`
	Source       string    `json:"source"`
	Version      string    `json:"version"`
	RegisteredAt time.Time `json:"registered_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	Trust        struct {
		Trusted bool   `json:"trusted"`
		Reason  string `json:"reason"`
	} `json:"trust"`
	// ExpiresIn is ExpiresAt relative to now, for the table.
	ExpiresIn string `json:"-"`
}

// registryView is the registry page's data.
type registryView struct {
	Revision  uint64     `json:"revision"`
	Providers []provider `json:"services"`
	Trusted   int        `json:"-"`
}

// listRegistry reads ipc.list, untrusted entries included (their verdict
// is what an operator needs to see).
func (d *Dashboard) listRegistry(r *http.Request) (*registryView, error) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	var v registryView
	if err := d.call(ctx, r, "ipc.list", map[string]any{"include_untrusted": true}, &v); err != nil {
		return nil, err
	}
	now := d.cfg.Now()
	sort.SliceStable(v.Providers, func(i, j int) bool { return v.Providers[i].Name < v.Providers[j].Name })
	for i := range v.Providers {
		p := &v.Providers[i]
		p.ExpiresIn = relative(p.ExpiresAt, now)
		if p.Trust.Trusted {
			v.Trusted++
		}
	}
	return &v, nil
}

// relative says when t is from now: "in 1m30s", "2m ago".
func relative(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	if descriptor.HeldByNode(t) { // another fleet node's local registration
		return "with its node"
	}
	d := t.Sub(now).Round(time.Second)
	if d > 7*24*time.Hour {
		return t.UTC().Format("2006-01-02")
	}
	if d < 0 {
		return (-d).String() + " ago"
	}
	return "in " + d.String()
}

func (d *Dashboard) registryPage(w http.ResponseWriter, r *http.Request) {
	v, err := d.listRegistry(r)
	if err != nil {
		d.fail(w, r, http.StatusBadGateway, err)
		return
	}
	d.render(w, r, http.StatusOK, "registry", "Registry", v)
}

// registryRows is the registry table's body alone, which the page's script
// fetches when the event stream says the registry changed.
func (d *Dashboard) registryRows(w http.ResponseWriter, r *http.Request) {
	v, err := d.listRegistry(r)
	if err != nil {
		d.fail(w, r, http.StatusBadGateway, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Registry-Revision", strconv.FormatUint(v.Revision, 10))
	if err := d.pages["registry"].ExecuteTemplate(w, "rows", v); err != nil {
		d.log.Error("dashboard: rendering rows", "err", err)
	}
}

// certificate is one join certificate as registry.certificates reports it.
type certificate struct {
	CertID           string   `json:"cert_id"`
	NodePublicKey    string   `json:"node_public_key"`
	Roles            []string `json:"roles"`
	IssuedAt         string   `json:"issued_at"`
	ExpiresAt        string   `json:"expires_at"`
	Status           string   `json:"status"`
	RevocationReason string   `json:"revocation_reason"`
}

// trustView is the trust page's data.
type trustView struct {
	Info struct {
		Network      string `json:"network"`
		AuthorityKey string `json:"authority_public_key"`
		AuthorityID  string `json:"authority_key_id"`
		Revision     uint64 `json:"revision"`
		LocalTTL     int    `json:"local_ttl_seconds"`
	}
	Certificates []certificate
	CRL          struct {
		ID         string `json:"crl_id"`
		Sequence   int64  `json:"sequence"`
		IssuedAt   string `json:"issued_at"`
		NextUpdate string `json:"next_update"`
		Issuer     string `json:"issuer"`
		Revoked    []struct {
			CertificateID string `json:"certificate_id"`
			RevokedAt     string `json:"revoked_at"`
			Reason        string `json:"reason"`
			Issuer        string `json:"issuer"`
		} `json:"revoked_certificates"`
	}
}

func (d *Dashboard) trustPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	var v trustView
	var certs struct {
		Certificates []certificate `json:"certificates"`
	}
	for _, c := range []struct {
		method string
		out    any
	}{{"registry.info", &v.Info}, {"registry.certificates", &certs}, {"registry.crl", &v.CRL}} {
		if err := d.call(ctx, r, c.method, map[string]any{}, c.out); err != nil {
			d.fail(w, r, http.StatusBadGateway, err)
			return
		}
	}
	v.Certificates = certs.Certificates
	sort.SliceStable(v.Certificates, func(i, j int) bool { return v.Certificates[i].IssuedAt > v.Certificates[j].IssuedAt })
	d.render(w, r, http.StatusOK, "trust", "Trust", &v)
}

// maxCorrelation bounds a correlation id typed into the evidence form.
const maxCorrelation = 256

func (d *Dashboard) evidencePage(w http.ResponseWriter, r *http.Request) {
	corr := strings.TrimSpace(r.URL.Query().Get("corr"))
	if corr == "" {
		d.render(w, r, http.StatusOK, "evidence", "Evidence", &evidenceView{})
		return
	}
	if len(corr) > maxCorrelation {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("a correlation id is at most %d bytes", maxCorrelation))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	var bundle json.RawMessage
	if err := d.call(ctx, r, "chp.export", map[string]any{"correlation_id": corr}, &bundle); err != nil {
		v := &evidenceView{Correlation: corr, Error: err.Error()}
		status := http.StatusNotFound
		if ne, ok := err.(*nodeError); ok && ne.status != http.StatusUnprocessableEntity {
			status = ne.status
		}
		v.SignIn = status == http.StatusUnauthorized
		d.render(w, r, status, "evidence", "Evidence", v)
		return
	}
	v := verifyEvidence(corr, bundle)
	var nodeSays struct {
		Valid  bool   `json:"valid"`
		Reason string `json:"reason"`
		Count  int    `json:"event_count"`
	}
	if err := d.call(ctx, r, "chp.verify", map[string]any{"correlation_id": corr}, &nodeSays); err != nil {
		v.NodeVerdict = "the node's chp.verify failed: " + err.Error()
	} else if nodeSays.Valid {
		v.NodeVerdict = fmt.Sprintf("valid (%d events)", nodeSays.Count)
	} else {
		v.NodeVerdict = "invalid: " + nodeSays.Reason
	}
	d.render(w, r, http.StatusOK, "evidence", "Evidence "+corr, v)
}
