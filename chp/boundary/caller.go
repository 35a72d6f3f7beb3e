package boundary

import (
	"context"
	"encoding/json"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/chp"
)

// Caller is an authenticated caller, bound by a transport (an X-CHP-Key
// name, a Unix-socket peer). A Caller in the context replaces the subject
// the envelope asserts and, when Scope is non-nil, limits which capabilities
// it may invoke (exact ids or trailing-* prefixes).
type Caller struct {
	ID    string
	Type  string // "api_key", "unix_peer", …
	Scope []string

	// subj and info cache the subject, and its rendering in evidence, of
	// a Caller made by NewCaller.
	subj json.RawMessage
	info *subjectInfo
}

// NewCaller returns a Caller whose subject — and its rendering in evidence —
// is computed once, for a binding that binds the same caller to many calls
// (a Unix-socket peer's uid). Its fields must not change afterwards.
func NewCaller(id, typ string, scope []string) *Caller {
	c := &Caller{ID: id, Type: typ, Scope: scope}
	c.subj = c.subject()
	if si, err := renderSubject(c.subj); err == nil {
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
