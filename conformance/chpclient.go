package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/capmesh/capmesh/jsonrpc"
)

// errNotOffered means the host does not offer a route or method (404, or
// JSON-RPC method not found).
var errNotOffered = errors.New("not offered by this host")

// chpTransport carries CHP objects over one binding.
type chpTransport interface {
	binding() string
	describe(ctx context.Context) (json.RawMessage, error)
	// capabilities returns the CapabilityDescriptor array the discovery
	// surface lists.
	capabilities(ctx context.Context) (json.RawMessage, error)
	invoke(ctx context.Context, env any) (json.RawMessage, error)
	replay(ctx context.Context, q any) (json.RawMessage, error)
	verify(ctx context.Context, corr string) (json.RawMessage, error)
	export(ctx context.Context, corr string) (json.RawMessage, error)
}

// httpCHP is the normative HTTP binding (chp-http-binding.md).
type httpCHP struct {
	base string
	key  string
	hc   *http.Client
}

func (h *httpCHP) binding() string { return "http" }

func (h *httpCHP) do(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.key != "" {
		req.Header.Set("X-CHP-Key", h.key)
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && !json.Valid(data):
		return nil, fmt.Errorf("%s %s: %w", method, path, errNotOffered)
	case resp.StatusCode == http.StatusNotFound && strings.Contains(string(data), "no route"):
		return nil, fmt.Errorf("%s %s: %w", method, path, errNotOffered)
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("%s %s: HTTP 401: pass the host's X-CHP-Key (--key or CHP_HOST_API_KEY)", method, path)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, abbrev(data))
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("%s %s: body is not JSON: %s", method, path, abbrev(data))
	}
	return data, nil
}

func (h *httpCHP) describe(ctx context.Context) (json.RawMessage, error) {
	return h.do(ctx, http.MethodGet, "/host", nil)
}

func (h *httpCHP) capabilities(ctx context.Context) (json.RawMessage, error) {
	raw, err := h.do(ctx, http.MethodGet, "/capabilities", nil)
	if err != nil {
		return nil, err
	}
	var body struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.Capabilities == nil {
		return nil, fmt.Errorf("GET /capabilities: want {\"capabilities\": [...]}, got %s", abbrev(raw))
	}
	return body.Capabilities, nil
}

func (h *httpCHP) invoke(ctx context.Context, env any) (json.RawMessage, error) {
	return h.do(ctx, http.MethodPost, "/invoke", env)
}

func (h *httpCHP) replay(ctx context.Context, q any) (json.RawMessage, error) {
	return h.do(ctx, http.MethodPost, "/replay", q)
}

func (h *httpCHP) verify(ctx context.Context, corr string) (json.RawMessage, error) {
	return h.do(ctx, http.MethodGet, "/verify/"+url.PathEscape(corr), nil)
}

func (h *httpCHP) export(ctx context.Context, corr string) (json.RawMessage, error) {
	return h.do(ctx, http.MethodGet, "/export/"+url.PathEscape(corr), nil)
}

// probeHTTPCHP reports whether base answers GET /health as a CHP host.
func probeHTTPCHP(ctx context.Context, h *httpCHP) bool {
	raw, err := h.do(ctx, http.MethodGet, "/health", nil)
	if err != nil {
		return false
	}
	var hl struct {
		Protocol string `json:"protocol"`
	}
	return json.Unmarshal(raw, &hl) == nil && strings.EqualFold(hl.Protocol, "chp")
}

// rpcCHP is capmesh's JSON-RPC binding (docs/chp-jsonrpc-binding.md).
type rpcCHP struct{ c jsonrpc.Caller }

func (r *rpcCHP) binding() string { return "jsonrpc" }

func (r *rpcCHP) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	var out json.RawMessage
	err := r.c.Call(ctx, method, params, &out)
	if errors.Is(err, jsonrpc.MethodNotFound) {
		return nil, fmt.Errorf("%s: %w", method, errNotOffered)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return out, nil
}

func (r *rpcCHP) describe(ctx context.Context) (json.RawMessage, error) {
	return r.call(ctx, "chp.describe", nil)
}

func (r *rpcCHP) capabilities(ctx context.Context) (json.RawMessage, error) {
	raw, err := r.describe(ctx)
	if err != nil {
		return nil, err
	}
	var d struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &d); err != nil || d.Capabilities == nil {
		return nil, fmt.Errorf("chp.describe has no capabilities array")
	}
	return d.Capabilities, nil
}

func (r *rpcCHP) invoke(ctx context.Context, env any) (json.RawMessage, error) {
	return r.call(ctx, "chp.invoke", env)
}

func (r *rpcCHP) replay(ctx context.Context, q any) (json.RawMessage, error) {
	return r.call(ctx, "chp.replay", q)
}

func (r *rpcCHP) verify(ctx context.Context, corr string) (json.RawMessage, error) {
	return r.call(ctx, "chp.verify", map[string]string{"correlation_id": corr})
}

func (r *rpcCHP) export(ctx context.Context, corr string) (json.RawMessage, error) {
	return r.call(ctx, "chp.export", map[string]string{"correlation_id": corr})
}

// abbrev shortens a reply for an error message: trimmed, at most 160 bytes.
func abbrev(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
