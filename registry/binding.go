package registry

import (
	"context"
	"encoding/json"
	"time"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/internal/state"
)

// Registration binding (docs/routing.md): a local registration belongs to
// the process that made it. ipc.register returns a registration token; a
// heartbeat, an unregistration or a re-registration of the name must carry
// it, or come from the registrant's own process (its SO_PEERCRED pid —
// what Songbird clients, which renew by name only, satisfy). Anyone else of
// the node's user may take the name over only when the registered endpoint
// is gone (nobody listens on its socket) or when registering the very same
// endpoint.

// Refusal words of the binding.
const (
	CodeWordNameInUse     = "name_in_use"
	CodeWordNotRegistrant = "not_the_registrant"
)

// liveLocal returns a copy of the live local registration of key, if
// this node admitted it on its machine (state.AdmittedHere).
func (n *Node) liveLocal(key string) (localRecord, bool) {
	now := n.cfg.Now()
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.liveLocalLocked(key, now)
}

// liveLocalLocked is liveLocal for a caller holding mu or wmu.
func (n *Node) liveLocalLocked(key string, now time.Time) (localRecord, bool) {
	e, ok := n.state.Lookup(key)
	if !ok || !state.AdmittedHere(e.Entry, n.cfg.Machine, n.shared != nil) || !n.state.Live(e, now) {
		return localRecord{}, false
	}
	var lr localRecord
	if json.Unmarshal(e.Raw, &lr) != nil {
		return localRecord{}, false
	}
	return lr, true
}

// mayTakeOver decides whether a registration of cur's name at ep by peer
// (holding token, maybe) may replace cur. It dials cur's endpoint when
// that is what decides, so the caller must not hold a lock.
func (n *Node) mayTakeOver(ctx context.Context, cur localRecord, peer jsonrpc.Peer, token, ep string) error {
	if cur.OwnedBy(peer.HasCred, peer.PID, token) || cur.Endpoint == ep {
		return nil
	}
	if token != "" {
		return refuse(CodeWordNotRegistrant, "registration_token does not match the registration of %q", cur.Name)
	}
	if n.endpointGone(ctx, cur.Endpoint) {
		return nil
	}
	return refuse(CodeWordNameInUse, "%q is registered by another process at %s, which is still listening; it must unregister (or stop) first", cur.Name, cur.Endpoint)
}

// endpointGone dials ep and reports whether nobody listens there; ep is
// a registration this node admitted on its machine (liveLocal), so the
// dial may reach this machine.
func (n *Node) endpointGone(ctx context.Context, ep string) bool {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ProbeTimeout)
	defer cancel()
	c, err := n.cfg.Dial(ctx, ep)
	if err == nil {
		c.Close()
		return false
	}
	return endpoint.Gone(ep, err)
}

// DropIfGone removes the local registration e after a call could not
// reach its Unix socket because nobody listens there any more (the host
// stopped without unregistering), so that discovery stops listing it now
// rather than at the end of its TTL. Signed descriptors are the signer's
// statement and are left to their TTL; the router just tries the next
// provider.
func (n *Node) DropIfGone(ctx context.Context, e Entry, err error) {
	if e.Source != SourceLocal || !endpoint.Gone(e.Endpoint, err) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	n.wmu.Lock()
	defer n.wmu.Unlock()
	cur, ok := n.state.Lookup(e.Key)
	if !ok || cur.Endpoint != e.Endpoint || !cur.RegisteredAt.Equal(e.RegisteredAt) {
		return // replaced meanwhile: the new registration is not the dead one
	}
	if cur.ExpiresAt.Equal(state.FarFuture) {
		return // another node's (shared store): its socket is on that node's machine
	}
	if _, derr := n.deregisterLocked(ctx, e.Key, EventDeregistered, "endpoint gone: "+err.Error()); derr != nil {
		n.log.WarnContext(ctx, "registry: dropping an unreachable provider", "name", e.Name, "err", derr)
		return
	}
	n.log.InfoContext(ctx, "registry: dropped a provider whose socket is gone", "name", e.Name, "endpoint", e.Endpoint)
}
