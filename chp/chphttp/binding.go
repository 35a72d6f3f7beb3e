package chphttp

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/tracing"
)

// NamedKey is a per-caller X-CHP-Key (chp-http-binding.md §2): a match binds
// Name as the verified subject; a non-nil Scope limits the capabilities the
// caller may invoke (exact ids or trailing-* prefixes).
type NamedKey struct {
	Name  string
	Key   string
	Scope []string
}

// Options configures the HTTP binding. A nil *Options means: no keys, every
// caller accepted (local-first default).
type Options struct {
	// SharedKeys are accepted from any caller (anonymous authentication).
	SharedKeys []string
	// NamedKeys authenticate named callers; a name may appear with several
	// keys during a rotation.
	NamedKeys []NamedKey
	// MaxBodyBytes bounds request bodies (default 4 MiB).
	MaxBodyBytes int64
}

// ParseNamedKeys parses the binding's "name:key[:scope1|scope2],…" form
// (the CHP_HOST_API_KEYS variable).
func ParseNamedKeys(s string) ([]NamedKey, error) {
	var out []NamedKey
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.SplitN(entry, ":", 3)
		if len(parts) < 2 || strings.TrimSpace(parts[0]) == "" || strings.TrimSpace(parts[1]) == "" {
			return nil, fmt.Errorf("chphttp: named key %q: want name:key[:scope|scope]", redactKey(entry))
		}
		k := NamedKey{Name: strings.TrimSpace(parts[0]), Key: strings.TrimSpace(parts[1])}
		if len(parts) == 3 && strings.TrimSpace(parts[2]) != "" {
			for _, sc := range strings.Split(parts[2], "|") {
				if sc = strings.TrimSpace(sc); sc != "" {
					k.Scope = append(k.Scope, sc)
				}
			}
		}
		out = append(out, k)
	}
	return out, nil
}

func redactKey(entry string) string {
	name, _, _ := strings.Cut(entry, ":")
	return name + ":<redacted>"
}

// OptionsFromEnv reads the binding's own variables: CHP_HOST_API_KEY (a
// shared key) and CHP_HOST_API_KEYS (named, optionally scoped keys).
func OptionsFromEnv() (*Options, error) {
	o := &Options{}
	if k := os.Getenv("CHP_HOST_API_KEY"); k != "" {
		o.SharedKeys = append(o.SharedKeys, k)
	}
	if s := os.Getenv("CHP_HOST_API_KEYS"); s != "" {
		named, err := ParseNamedKeys(s)
		if err != nil {
			return nil, err
		}
		o.NamedKeys = named
	}
	return o, nil
}

type binding struct {
	b       *boundary.Boundary
	shared  [][32]byte
	named   []namedDigest
	maxBody int64
}

type namedDigest struct {
	key   NamedKey
	digit [32]byte
}

// Handler returns the normative HTTP binding of b (chp-http-binding.md): a
// processed invocation — whatever its outcome — is 200 with an
// InvocationResult; 400 malformed, 401 unauthenticated, 404 unknown route
// or (/verify, /export) a correlation without evidence.
// Routes: GET / and /health and /.well-known/chp-identity (public); GET
// /host, /capabilities, /replay/{id}, /verify/{id}, /export/{id},
// /revocations; POST /invoke, /replay, /revocations.
func Handler(b *boundary.Boundary, opts *Options) http.Handler {
	h := &binding{b: b, maxBody: 4 << 20}
	if opts != nil {
		for _, k := range opts.SharedKeys {
			h.shared = append(h.shared, sha256.Sum256([]byte(k)))
		}
		for _, k := range opts.NamedKeys {
			h.named = append(h.named, namedDigest{key: k, digit: sha256.Sum256([]byte(k.Key))})
		}
		if opts.MaxBodyBytes > 0 {
			h.maxBody = opts.MaxBodyBytes
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.health)
	mux.HandleFunc("GET /health", h.health)
	mux.HandleFunc("GET /.well-known/chp-identity", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, b.Identity())
	})
	mux.HandleFunc("GET /host", h.authed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.Describe())
	}))
	mux.HandleFunc("GET /capabilities", h.authed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"capabilities": b.Capabilities()})
	}))
	mux.HandleFunc("POST /invoke", h.authed(h.invoke))
	mux.HandleFunc("GET /revocations", h.authed(h.getRevocations))
	mux.HandleFunc("POST /revocations", h.authed(h.postRevocation))
	mux.HandleFunc("GET /replay/{corr...}", h.authed(func(w http.ResponseWriter, r *http.Request) {
		h.replay(w, r, chp.ReplayQuery{CorrelationID: r.PathValue("corr")})
	}))
	mux.HandleFunc("POST /replay", h.authed(func(w http.ResponseWriter, r *http.Request) {
		var q chp.ReplayQuery
		if !h.decode(w, r, &q) {
			return
		}
		h.replay(w, r, q)
	}))
	mux.HandleFunc("GET /verify/{corr...}", h.authed(func(w http.ResponseWriter, r *http.Request) {
		v, err := b.Verify(r.Context(), r.PathValue("corr"))
		switch {
		case errors.Is(err, evlog.ErrUnknownCorrelation):
			httpError(w, http.StatusNotFound, "not_found", err.Error())
		case err != nil:
			httpError(w, http.StatusInternalServerError, "evidence_unavailable", err.Error())
		default:
			writeJSON(w, http.StatusOK, v)
		}
	}))
	mux.HandleFunc("GET /export/{corr...}", h.authed(func(w http.ResponseWriter, r *http.Request) {
		bundle, err := b.Export(r.Context(), r.PathValue("corr"))
		switch {
		case errors.Is(err, evlog.ErrUnknownCorrelation):
			httpError(w, http.StatusNotFound, "not_found", err.Error())
		case err != nil:
			httpError(w, http.StatusInternalServerError, "evidence_unavailable", err.Error())
		default:
			writeJSON(w, http.StatusOK, bundle)
		}
	}))
	h.witnessRoutes(mux) // witness.go
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Unknown routes and methods get the binding's error envelope, not
		// the mux's plain text.
		if _, pattern := mux.Handler(r); pattern == "" {
			if r.Method != http.MethodGet && r.Method != http.MethodPost {
				httpError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not supported")
				return
			}
			httpError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (h *binding) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "host_id": h.b.HostID(), "protocol": "chp",
		"version": chp.ProtocolVersion, "host_version": h.b.HostVersion()})
}

// authenticate returns the caller bound by X-CHP-Key (nil for an anonymous
// but authorized caller) and whether the request may proceed. Every
// configured key is compared, in constant time, on a digest (so the key
// length does not leak either).
func (h *binding) authenticate(r *http.Request) (*boundary.Caller, bool) {
	if len(h.shared) == 0 && len(h.named) == 0 {
		return nil, true
	}
	got := sha256.Sum256([]byte(r.Header.Get("X-CHP-Key")))
	var caller *boundary.Caller
	ok := 0
	for i := range h.named {
		if subtle.ConstantTimeCompare(got[:], h.named[i].digit[:]) == 1 && caller == nil {
			k := h.named[i].key
			caller = &boundary.Caller{ID: k.Name, Type: "api_key", Scope: k.Scope}
			ok = 1
		}
	}
	for i := range h.shared {
		ok |= subtle.ConstantTimeCompare(got[:], h.shared[i][:])
	}
	if r.Header.Get("X-CHP-Key") == "" {
		return nil, false
	}
	return caller, ok == 1
}

func (h *binding) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := h.authenticate(r)
		if !ok {
			httpError(w, http.StatusUnauthorized, "unauthorized", "Missing or invalid X-CHP-Key")
			return
		}
		if v := r.Header.Get("X-CHP-Version"); v != "" && !slices.Contains(chp.SupportedVersions, v) {
			writeJSON(w, http.StatusBadRequest, map[string]any{
				"denial": map[string]any{"code": chp.CodeVersionUnsupported, "requested": v, "supported": chp.SupportedVersions},
				"error": map[string]any{"code": chp.CodeVersionUnsupported,
					"message": fmt.Sprintf("wire version %q not supported; host speaks %v", v, chp.SupportedVersions)},
			})
			return
		}
		if caller != nil {
			r = r.WithContext(boundary.WithCaller(r.Context(), caller))
		}
		next(w, r)
	}
}

func (h *binding) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			httpError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", h.maxBody))
		} else {
			httpError(w, http.StatusBadRequest, "bad_request", err.Error())
		}
		return nil, false
	}
	return body, true
}

func (h *binding) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := h.readBody(w, r)
	if !ok {
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		httpError(w, http.StatusBadRequest, "bad_request", "malformed JSON: "+err.Error())
		return false
	}
	return true
}

func (h *binding) invoke(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	env, err := chp.ParseEnvelope(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, "invalid_envelope", err.Error())
		return
	}
	if tp := r.Header.Get("Traceparent"); tp != "" {
		// W3C Trace Context's HTTP carrier: the caller's span is the
		// invocation's parent and its trace id goes into the evidence.
		if sc, err := tracing.ParseTraceparent(tp); err == nil {
			r = r.WithContext(tracing.ContextWith(r.Context(), sc))
		}
	}
	if env.Mode == "stream" {
		h.invokeStream(w, r, env)
		return
	}
	res, err := h.b.Invoke(r.Context(), env)
	h.answerInvoke(w, env, res, err)
}

func (h *binding) replay(w http.ResponseWriter, r *http.Request, q chp.ReplayQuery) {
	res, err := h.b.Replay(r.Context(), q)
	switch {
	case errors.Is(err, evlog.ErrBadQuery):
		httpError(w, http.StatusBadRequest, "bad_request", err.Error())
	case err != nil:
		httpError(w, http.StatusInternalServerError, "evidence_unavailable", err.Error())
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"response encoding failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg}})
}
