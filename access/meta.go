package access

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/jsonrpc"
)

// MetaKey is the member of params._meta that presents an X-CHP-Key on a
// JSON-RPC binding without headers (a Unix socket, TCP). It is never
// forwarded by a node.
const MetaKey = "chp_key"

// MetaCaller is the member of params._meta in which a routing node
// attests who the caller it forwards is. A host believes it only from a
// Unix peer of its own uid.
const MetaCaller = "io.github.capmesh.caller"

// HeaderKey is the HTTP header that presents a key (CHP HTTP binding §2).
const HeaderKey = "X-CHP-Key"

// attestation is the MetaCaller object.
type attestation struct {
	Kind  string   `json:"kind"`
	ID    string   `json:"id,omitempty"`
	UID   *uint32  `json:"uid,omitempty"`
	Scope []string `json:"scope,omitempty"`
	Door  string   `json:"door,omitempty"`
	Via   string   `json:"via,omitempty"`
}

// Check establishes the principal of a JSON-RPC call and authorizes op
// for it. It returns the context the call runs with: ctx itself when the
// principal is the one the connection's peer implies (the common case
// costs nothing), else ctx carrying the principal and its CHP caller.
// A wrong key in params._meta is refused whatever op is.
func (p *Policy) Check(ctx context.Context, op Op, params json.RawMessage) (context.Context, error) {
	pr, bound := FromContext(ctx)
	if !bound {
		pr = peerPrincipal(ctx, p.uid)
	}
	changed := false
	if mayHaveMeta(params) {
		key, att, err := readMeta(params)
		if err != nil {
			return ctx, err
		}
		switch {
		case att != nil && pr.Kind == SameUser && pr.HasUID && pr.Via == "":
			// A node of this host's own user routed the call: it says who
			// the caller is.
			pr = p.fromAttestation(att)
			changed = true
		case key != nil && p.Keyed():
			kp, err := p.AuthenticateKey(*key)
			if err != nil {
				return ctx, err
			}
			if pr.Kind != SameUser { // the host's own user stays itself
				kp.Door = pr.Door
				pr, changed = kp, true
			}
		}
	}
	if err := p.Authorize(pr, op); err != nil {
		return ctx, err
	}
	if !changed {
		return ctx, nil
	}
	return bind(ctx, pr), nil
}

// bind returns ctx carrying pr and its CHP caller.
func bind(ctx context.Context, pr Principal) context.Context {
	return boundary.WithCaller(WithPrincipal(ctx, pr), pr.Caller())
}

// mayHaveMeta is a quick test: params that cannot name _meta.
func mayHaveMeta(params json.RawMessage) bool {
	return bytes.Contains(params, []byte("_meta")) || bytes.IndexByte(params, '\\') >= 0
}

// readMeta returns the key and the attestation params._meta carries, if
// any. Params that are not an object carry neither.
func readMeta(params json.RawMessage) (key *string, att *attestation, err error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil {
		return nil, nil, nil
	}
	raw, ok := top["_meta"]
	if !ok {
		return nil, nil, nil
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw, &meta) != nil {
		return nil, nil, nil // not an object: the method's own decoding says so
	}
	if k, ok := meta[MetaKey]; ok {
		var s string
		if json.Unmarshal(k, &s) != nil {
			return nil, nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "Invalid params: _meta.%s must be a string", MetaKey)
		}
		key = &s
	}
	if a, ok := meta[MetaCaller]; ok {
		att = new(attestation)
		if json.Unmarshal(a, att) != nil {
			att = &attestation{Kind: Anonymous.String()} // unreadable: fail closed
		}
	}
	return key, att, nil
}

// fromAttestation is the principal a trusted node attests. A uid is
// judged against this host's own; an unknown kind is anonymous.
func (p *Policy) fromAttestation(a *attestation) Principal {
	k, _ := kindOf(a.Kind)
	pr := Principal{Door: a.Door, Via: a.Via}
	if pr.Via == "" {
		pr.Via = "node"
	}
	switch k {
	case SameUser, OtherUser:
		if a.UID == nil {
			pr.Kind = Anonymous
			return pr
		}
		pr.UID, pr.HasUID = *a.UID, true
		pr.Kind = OtherUser
		if *a.UID == p.uid {
			pr.Kind = SameUser
		}
	case NamedKey:
		if a.ID == "" {
			pr.Kind = Anonymous
			return pr
		}
		pr.Kind, pr.Name, pr.Scope = NamedKey, a.ID, a.Scope
	case Family:
		if a.ID == "" {
			pr.Kind = Anonymous
			return pr
		}
		pr.Kind, pr.Name = Family, a.ID
	default:
		pr.Kind = k
	}
	return pr
}

// Forward returns params as a node forwards them to the provider it
// routes a call to: with the caller ctx belongs to (Resolve, for a node
// running as this process's uid) attested in params._meta[MetaCaller] —
// replacing whatever the caller put there — and any key the caller
// presented in _meta removed. via names the node. Params that are not an
// object cannot carry the attestation: they are forwarded unchanged for
// the node's own user (whom the provider sees anyway) and refused with
// InvalidParams for anyone else.
func Forward(ctx context.Context, params json.RawMessage, via string) (json.RawMessage, error) {
	pr := Resolve(ctx, uint32(os.Getuid()))
	t := bytes.TrimSpace(params)
	if len(t) == 0 || string(t) == "null" {
		t = []byte("{}")
	}
	var top map[string]json.RawMessage
	if t[0] != '{' || json.Unmarshal(t, &top) != nil {
		if pr.Kind == SameUser && pr.Via == "" {
			return params, nil
		}
		return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "Invalid params: a call routed on behalf of %s needs object params, which carry who the caller is", pr.Kind)
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := top["_meta"]; ok {
		if json.Unmarshal(raw, &meta) != nil || meta == nil {
			meta = map[string]json.RawMessage{}
		}
	}
	delete(meta, MetaKey)
	a := attestation{Kind: pr.Kind.String(), Door: pr.Door, Via: via}
	if pr.Via != "" {
		a.Via = pr.Via + "," + via
	}
	if pr.HasUID {
		a.UID = &pr.UID
	}
	switch pr.Kind {
	case NamedKey:
		a.ID, a.Scope = pr.Name, pr.Scope
	case Family:
		a.ID = pr.Name
	}
	if pr.Kind == SameUser && !pr.HasUID {
		// The node's own process: its uid.
		u := uint32(os.Getuid())
		a.UID = &u
	}
	ab, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	meta[MetaCaller] = ab
	if top["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}

// HTTP wraps the JSON-RPC bridge of an HTTP listener: a request that
// presents X-CHP-Key is authenticated here — a wrong key is answered 401
// with a JSON-RPC error body, before anything is dispatched — and a
// valid one binds its principal for every call of the request. A request
// without the header goes on as an anonymous caller, whom Check refuses
// where a credential is required.
func (p *Policy) HTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(HeaderKey)
		if key == "" {
			next.ServeHTTP(w, r)
			return
		}
		pr, err := p.AuthenticateKey(key)
		if err != nil {
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": err})
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", "X-CHP-Key")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write(body)
			return
		}
		pr.Door = "http"
		next.ServeHTTP(w, r.WithContext(bind(r.Context(), pr)))
	})
}

// RequireKey guards an HTTP resource for operators (a node's /metrics):
// a policy without keys serves it to every caller that reaches the
// listener — which is then loopback only, unless the host was told to
// listen beyond it — as it serves discovery; a policy with keys serves it
// only to a request presenting a valid X-CHP-Key, and answers any other
// 401 with a JSON-RPC error body.
func (p *Policy) RequireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.Keyed() {
			next.ServeHTTP(w, r)
			return
		}
		key := r.Header.Get(HeaderKey)
		err := error(errKeyRequired)
		if key != "" {
			_, err = p.AuthenticateKey(key)
		}
		if err != nil {
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": err})
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", "X-CHP-Key")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write(body)
			return
		}
		next.ServeHTTP(w, r)
	})
}

var errKeyRequired = jsonrpc.Errorf(CodeUnauthenticated, "authentication required: this resource is served only to key holders (%s)", HeaderKey).
	WithData(map[string]any{"code": "unauthorized"})
