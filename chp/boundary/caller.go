package boundary

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/internal/evjson"
)

// Caller is an authenticated caller, bound by a transport (an X-CHP-Key
// name, a Unix-socket peer). A Caller in the context replaces the subject
// the envelope asserts and, when Scope is non-nil, limits which capabilities
// it may invoke (exact ids or trailing-* prefixes).
type Caller struct {
	ID    string
	Type  string // "api_key", "unix_peer", …
	Scope []string
	// Claimed marks a caller the binding could not authenticate (an
	// anonymous network caller, one a node routed on): the envelope's own
	// subject is kept and recorded as a claim (ClaimedSubject), and no
	// binding may derive a verified caller from the transport instead.
	Claimed bool

	// subj and info cache the subject, and its rendering in evidence, of
	// a Caller made by NewCaller.
	subj json.RawMessage
	info *evjson.Subject
}

// NewCaller returns a Caller whose subject — and its rendering in evidence —
// is computed once, for a binding that binds the same caller to many calls
// (a Unix-socket peer's uid). Its fields must not change afterwards.
func NewCaller(id, typ string, scope []string) *Caller {
	c := &Caller{ID: id, Type: typ, Scope: scope}
	c.subj = c.subject()
	if si, err := evjson.RenderSubject(c.subj); err == nil {
		c.info = &si
	}
	return c
}

type callerKey struct{}
type invocationKey struct{}

// WithCaller returns ctx carrying an authenticated caller.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// subject is the verified subject object a bound caller stands for.
func (c *Caller) subject() json.RawMessage {
	if c.subj != nil {
		return c.subj
	}
	b := make([]byte, 0, 48+len(c.ID)+len(c.Type))
	b = append(b, `{"id":`...)
	b = canonical.AppendChpStableString(b, c.ID)
	b = append(b, `,"type":`...)
	b = canonical.AppendChpStableString(b, c.Type)
	return append(b, `,"verified":true}`...)
}

// ClaimedSubject returns a caller-supplied subject as evidence records it
// when no authenticated caller binds one: as given, except that a
// top-level "verified" member other than false becomes false — a claim is
// never recorded as verified.
func ClaimedSubject(raw json.RawMessage) json.RawMessage {
	if string(raw) == chp.LocalSubject || (!bytes.Contains(raw, []byte("verified")) && bytes.IndexByte(raw, '\\') < 0) {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw // not an object: the header refuses it
	}
	if _, ok := m["verified"]; !ok {
		return raw
	}
	// Re-encoded even when it says false already: a repeated member must
	// not leave a second, true one for a later reader to pick.
	m["verified"] = json.RawMessage("false")
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// CallerFromContext returns the caller bound by WithCaller.
func CallerFromContext(ctx context.Context) (*Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(*Caller)
	return c, ok && c != nil
}

// InvocationFromContext returns the (normalized) envelope of the invocation
// a handler is executing.
func InvocationFromContext(ctx context.Context) (*chp.InvocationEnvelope, bool) {
	e, ok := ctx.Value(invocationKey{}).(*chp.InvocationEnvelope)
	return e, ok
}

// invCtx is the context a handler runs with: the invocation's, answering
// InvocationFromContext and CallerFromContext itself.
type invCtx struct {
	context.Context
	env    *chp.InvocationEnvelope
	caller *Caller
}

// Value implements context.Context.
func (c *invCtx) Value(key any) any {
	switch key {
	case invocationKey{}:
		return c.env
	case callerKey{}:
		if c.caller != nil {
			return c.caller
		}
	}
	return c.Context.Value(key)
}

// familyCallers holds one immutable Caller per BTSP family seen.
var familyCallers sync.Map

// FamilyCaller is the verified caller of a peer that proved a BTSP family
// in its transport handshake: "family:<id>", type btsp_family. Callers are
// cached per family (a host sees few).
func FamilyCaller(family string) *Caller {
	if c, ok := familyCallers.Load(family); ok {
		return c.(*Caller)
	}
	c, _ := familyCallers.LoadOrStore(family, NewCaller("family:"+family, "btsp_family", nil))
	return c.(*Caller)
}
