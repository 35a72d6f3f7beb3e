package access

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strconv"
	"sync"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
)

// JSON-RPC codes of a refusal by the access policy: the same the registry
// uses for an unauthenticated and a forbidden caller.
const (
	// CodeUnauthenticated: no credential, or a wrong one, where one is
	// required (HTTP: 401).
	CodeUnauthenticated jsonrpc.Code = errcatalog.Unauthorized
	// CodeForbidden: the caller is known but may not do this.
	CodeForbidden jsonrpc.Code = errcatalog.Forbidden
)

// Kind is how a caller was established.
type Kind uint8

// The kinds of principal, weakest first.
const (
	Anonymous Kind = iota // a network caller without a credential
	OtherUser             // a Unix peer of another uid
	SharedKey             // a caller that presented a shared key
	Family                // a peer that proved the family seed in a BTSP handshake
	NamedKey              // a caller that presented a named key
	SameUser              // this process, or a Unix peer of the host's uid
)

var kindNames = [...]string{"anonymous", "other_user", "shared_key", "family", "named_key", "same_user"}

// String returns the kind's wire name (the attestation's "kind").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

func kindOf(s string) (Kind, bool) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), true
		}
	}
	return Anonymous, false
}

// Principal is who a caller is, as a binding established it.
type Principal struct {
	Kind Kind
	// Name is a named key's name, or the family a Family peer proved.
	Name string
	// UID is a Unix peer's uid (HasUID), as the kernel reported it to this
	// process or to the node that routed the call.
	UID    uint32
	HasUID bool
	// Scope limits a named key to capabilities (exact ids or trailing-*
	// prefixes); nil is unrestricted.
	Scope []string
	// Door is the binding the caller came in through: "unix", "tcp",
	// "http", "pipe" (in memory) or "process" (a call in process).
	Door string
	// Via names the node that routed the call; empty for a direct call.
	Via string

	caller *boundary.Caller // the verified caller, when made already
}

// Verified reports whether the principal's identity is authenticated: a
// Unix peer's uid or a named key. Only a verified principal binds the
// evidence subject; every other subject is recorded as a claim.
func (p Principal) Verified() bool {
	return p.Kind == NamedKey || (p.Kind == Family && p.Name != "") || ((p.Kind == SameUser || p.Kind == OtherUser) && p.HasUID)
}

// Authenticated reports whether the caller is one a closed host serves:
// a key holder or the host's own user. Another user's uid is verified but
// does not count: only an open host serves other users.
func (p Principal) Authenticated() bool { return p.Kind >= SharedKey }

// Caller returns the CHP caller the principal binds: a verified subject
// ("uid:<n>" unix_peer, or the key name as api_key) with the key's scope,
// or a Claimed caller that keeps the envelope's own subject as a claim.
func (p Principal) Caller() *boundary.Caller {
	if p.caller != nil {
		return p.caller
	}
	switch {
	case p.Kind == NamedKey:
		return boundary.NewCaller(p.Name, "api_key", p.Scope)
	case p.Kind == Family && p.Name != "":
		return boundary.FamilyCaller(p.Name)
	case p.Verified():
		return uidCaller(p.UID)
	case p.Kind == SharedKey:
		return sharedCaller
	}
	return anonymousCaller
}

var (
	sharedCaller    = &boundary.Caller{ID: "shared_key", Type: "shared_key", Claimed: true}
	anonymousCaller = &boundary.Caller{ID: "anonymous", Type: "anonymous", Claimed: true}
	uidCallers      sync.Map // uid → *boundary.Caller (a host sees few)
)

func uidCaller(uid uint32) *boundary.Caller {
	if c, ok := uidCallers.Load(uid); ok {
		return c.(*boundary.Caller)
	}
	c, _ := uidCallers.LoadOrStore(uid, boundary.NewCaller("uid:"+strconv.FormatUint(uint64(uid), 10), "unix_peer", nil))
	return c.(*boundary.Caller)
}

// Op is what a call does, as the policy sees it.
type Op uint8

// The operations of docs/access.md's table.
const (
	// OpPublic: health, identity.get, capabilities.list, discovery.
	OpPublic Op = iota
	// OpInvoke: a capability call, chp.invoke, a call a node routes.
	OpInvoke
	// OpDescribe: chp.describe (CHP GET /host, /capabilities).
	OpDescribe
	// OpEvidence: chp.replay, chp.verify, chp.export.
	OpEvidence
	// OpRegister: ipc.register, ipc.heartbeat, ipc.unregister — passed to
	// the registry, whose credential is a signed descriptor or the same
	// user's Unix peer.
	OpRegister
	// OpAdminister: registry.enroll, registry.invite, registry.revoke,
	// health.drain.
	OpAdminister
)

var opNames = [...]string{"public", "invoke", "describe", "evidence", "register", "administer"}

// String names the operation.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Classifier is implemented by a set of methods mounted on a host (the
// node's registry) that says which operation each of its methods is; a
// mounted method of a set that does not is an invocation.
type Classifier interface {
	AccessOp(method string) Op
}

// Config configures a Policy.
type Config struct {
	// Keys are the X-CHP-Key credentials (shared, and named with optional
	// scopes), the CHP HTTP binding's; nil or empty means none.
	Keys *chphttp.Options
	// Open lets anonymous callers and other users invoke, describe and read
	// evidence (the CHP local-first default of a keyless host).
	Open bool
	// UID is the host's own uid: a Unix peer with it is the same user.
	UID uint32
}

// Policy is a host's access policy. It is immutable and safe for
// concurrent use.
type Policy struct {
	shared [][32]byte
	named  []namedKey
	open   bool
	uid    uint32
}

type namedKey struct {
	digest [32]byte
	p      Principal
}

// NewPolicy returns the policy cfg describes.
func NewPolicy(cfg Config) *Policy {
	p := &Policy{open: cfg.Open, uid: cfg.UID}
	if k := cfg.Keys; k != nil {
		for _, s := range k.SharedKeys {
			p.shared = append(p.shared, sha256.Sum256([]byte(s)))
		}
		for _, nk := range k.NamedKeys {
			pr := Principal{Kind: NamedKey, Name: nk.Name, Scope: nk.Scope}
			pr.caller = boundary.NewCaller(nk.Name, "api_key", nk.Scope)
			p.named = append(p.named, namedKey{digest: sha256.Sum256([]byte(nk.Key)), p: pr})
		}
	}
	return p
}

// Keyed reports whether any key is configured.
func (p *Policy) Keyed() bool { return len(p.shared)+len(p.named) > 0 }

// Open reports whether anonymous callers and other users may invoke.
func (p *Policy) Open() bool { return p.open }

// UID returns the host's own uid.
func (p *Policy) UID() uint32 { return p.uid }

// AuthenticateKey returns the principal a presented key stands for, or a
// CodeUnauthenticated error for a key that matches none. Every configured
// key is compared in constant time on its digest. A host without keys
// ignores a presented key, as the CHP HTTP binding does: the caller is
// anonymous.
func (p *Policy) AuthenticateKey(key string) (Principal, error) {
	if !p.Keyed() {
		return Principal{Kind: Anonymous}, nil
	}
	got := sha256.Sum256([]byte(key))
	var found *Principal
	ok := 0
	for i := range p.named {
		if subtle.ConstantTimeCompare(got[:], p.named[i].digest[:]) == 1 && found == nil {
			found = &p.named[i].p
			ok = 1
		}
	}
	for i := range p.shared {
		ok |= subtle.ConstantTimeCompare(got[:], p.shared[i][:])
	}
	switch {
	case ok == 0 || key == "":
		return Principal{}, errWrongKey
	case found != nil:
		return *found, nil
	}
	return Principal{Kind: SharedKey}, nil
}

var errWrongKey = jsonrpc.Errorf(CodeUnauthenticated, "invalid key: the presented X-CHP-Key matches no key of this host").
	WithData(map[string]any{"code": "unauthorized"})

// Authorize answers whether p may do op: nil, or a *jsonrpc.Error with
// CodeUnauthenticated (a credential would help) or CodeForbidden (it would
// not). It is the whole table of docs/access.md.
func (p *Policy) Authorize(pr Principal, op Op) error {
	switch op {
	case OpPublic, OpRegister:
		return nil
	case OpAdminister:
		if pr.Kind == SameUser {
			return nil
		}
		return jsonrpc.Errorf(CodeForbidden, "operator methods are accepted only over the host's Unix socket from its own user (caller: %s)", pr.describe()).
			WithData(map[string]any{"code": "peer_is_another_user", "caller": pr.Kind.String()})
	}
	if pr.Authenticated() || p.open {
		return nil
	}
	if pr.Kind == OtherUser {
		return jsonrpc.Errorf(CodeForbidden, "forbidden: %s is another user than this host's (uid %d); present a key or ask the host's user", pr.describe(), p.uid).
			WithData(map[string]any{"code": "peer_is_another_user", "caller": pr.Kind.String()})
	}
	return jsonrpc.Errorf(CodeUnauthenticated, "authentication required: this host serves %s only to its own user and to key holders (X-CHP-Key on HTTP, params._meta.%s on JSON-RPC)", op, MetaKey).
		WithData(map[string]any{"code": "unauthorized", "caller": pr.Kind.String()})
}

// describe names the principal in a refusal.
func (pr Principal) describe() string {
	s := pr.Kind.String()
	if pr.HasUID {
		s += " uid " + strconv.FormatUint(uint64(pr.UID), 10)
	}
	if pr.Door != "" {
		s += " over " + pr.Door
	}
	if pr.Via != "" {
		s += " via node " + strconv.Quote(pr.Via)
	}
	return s
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p, for what runs the call (a node
// that routes it passes p on).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, &p)
}

// FromContext returns the principal WithPrincipal bound.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	if !ok || p == nil {
		return Principal{}, false
	}
	return *p, true
}

// Resolve returns the principal of the call ctx belongs to: the one bound
// by WithPrincipal, else the one the connection's peer implies for a host
// running as uid — the same user for a call in process or in memory and
// for a Unix peer of uid, another user for a Unix peer of another uid,
// anonymous for anything else.
func Resolve(ctx context.Context, uid uint32) Principal {
	if p, ok := FromContext(ctx); ok {
		return p
	}
	return peerPrincipal(ctx, uid)
}

func peerPrincipal(ctx context.Context, uid uint32) Principal {
	peer, ok := jsonrpc.PeerFromContext(ctx)
	switch {
	case !ok:
		return Principal{Kind: SameUser, Door: "process"}
	case peer.Transport == "unix" && peer.HasCred:
		k := OtherUser
		if peer.UID == uid {
			k = SameUser
		}
		if k == OtherUser && peer.Family != "" {
			// Another user who proved the family seed: a family member.
			return Principal{Kind: Family, Name: peer.Family, UID: peer.UID, HasUID: true, Door: "unix"}
		}
		return Principal{Kind: k, UID: peer.UID, HasUID: true, Door: "unix"}
	case peer.Family != "":
		return Principal{Kind: Family, Name: peer.Family, Door: peer.Transport}
	case peer.Transport == "pipe":
		return Principal{Kind: SameUser, Door: "pipe"}
	}
	return Principal{Kind: Anonymous, Door: peer.Transport}
}
