package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
	"github.com/capmesh/capmesh/registry/internal/state"
)

func currentUID() uint32 { return uint32(os.Getuid()) }

// LocalRegistration is an unsigned ecoPrimals-style registration.
type LocalRegistration struct {
	Name         string
	Capabilities []string
	Endpoint     string
	Version      string
	// Token is the registration token of the registration this one
	// renews, when the registrant holds one (see RegisterLocal).
	Token string
}

// routeHTTP bounds a whole routed call over the HTTP bridge, follows no redirect, honours endpoint.RefuseLocal.
var routeHTTP = endpoint.NewHTTPClients(30 * time.Second)

// DialEndpoint is the default Config.Dial: the endpoint package's dialer
// (newline JSON-RPC over a Unix socket or TCP, BTSP to this node's family),
// or the HTTP bridge for http(s) URLs, each call bounded as a whole; both
// refuse to reach this machine under endpoint.RefuseLocal (the router's).
func DialEndpoint(ctx context.Context, ep string) (jsonrpc.Caller, error) {
	u, err := endpoint.Normalize(ep)
	if err != nil {
		return nil, err
	}
	a, err := endpoint.Parse(u)
	if err != nil {
		return nil, err
	}
	if a.Scheme == "http" || a.Scheme == "https" {
		return jhttp.NewClient(u, routeHTTP.For(ctx)), nil
	}
	return endpoint.DialAddress(ctx, a, nil)
}

// RegisterLocal admits an unsigned registration. Only a Unix-socket peer
// of the node's own user may make one (SO_PEERCRED), and only after the
// registry has called identity.get on the endpoint and the primal name it
// answers equals the registered name (ASCII case-insensitive, as Songbird
// compares). An unreachable endpoint is a refusal, not trust on first use.
//
// The registration is bound to its registrant: RegisterLocal returns a
// registration token that Heartbeat and Unregister (and a re-registration
// of the name) must present, unless they come from the registrant's own
// process. A live registration of the name by someone else is replaced
// only when it names the same endpoint or its endpoint is gone (nobody
// listens on its socket); otherwise the answer is CodeWordNameInUse.
func (n *Node) RegisterLocal(ctx context.Context, peer jsonrpc.Peer, reg LocalRegistration) (Entry, string, error) {
	if peer.Transport != "unix" || !peer.HasCred {
		return Entry{}, "", refuse(CodeWordUnsignedRemote, "unsigned registration is accepted only over the node's Unix socket; over %s send "+signedRegistrationHint, nonEmpty(peer.Transport, "this transport"))
	}
	if peer.UID != *n.cfg.UID {
		return Entry{}, "", refuse(CodeWordForeignUser, "peer uid %d is not the node's user (uid %d)", peer.UID, *n.cfg.UID)
	}
	if err := state.CheckLocalName(reg.Name); err != nil {
		return Entry{}, "", refuse(CodeWordInvalidParams, "%v", err)
	}
	ep, err := endpoint.Normalize(reg.Endpoint)
	if err != nil {
		return Entry{}, "", refuse(CodeWordInvalidParams, "%v", err)
	}
	if err := n.refuseSelf(ep); err != nil {
		return Entry{}, "", err
	}
	for i, c := range reg.Capabilities {
		if c == "" {
			return Entry{}, "", refuse(CodeWordInvalidParams, "capabilities[%d] is empty", i)
		}
	}
	if err := n.probeIdentity(ctx, ep, reg.Name); err != nil {
		return Entry{}, "", err
	}
	key := state.LocalKey(reg.Name)
	prev, had := n.liveLocal(key)
	if had {
		if err := n.mayTakeOver(ctx, prev, peer, reg.Token, ep); err != nil {
			return Entry{}, "", err
		}
	}
	token := state.NewToken()
	now := n.cfg.Now()
	lr := localRecord{Name: reg.Name, Capabilities: append([]string{}, reg.Capabilities...), Endpoint: ep, Version: reg.Version, UID: peer.UID,
		PID: peer.PID, TokenHash: state.TokenHash(token), RegisteredAt: now.UTC(), ExpiresAt: now.Add(n.cfg.LocalTTL).UTC()}
	raw, _ := json.Marshal(lr)
	e := state.FromLocal(lr, raw)
	n.wmu.Lock()
	defer n.wmu.Unlock()
	cur, live := n.liveLocalLocked(key, now)
	if live && (!had || cur.Endpoint != prev.Endpoint || !cur.RegisteredAt.Equal(prev.RegisteredAt)) {
		return Entry{}, "", refuse(CodeWordNameInUse, "the registration of %q changed while this one was checked; register again", reg.Name)
	}
	kind := EventRegistered
	if live {
		kind = EventReplaced
	}
	if err := n.commit(ctx, []Op{{Record: Record{Kind: kindLocal, Key: e.Key, Value: raw, ExpiresAt: lr.ExpiresAt, Machine: state.Stamp(e, n.cfg.Machine)}}},
		Event{Kind: kind, Key: e.Key, Name: e.Name, Capabilities: e.Capabilities, Endpoint: e.Endpoint, Source: e.Source}); err != nil {
		return Entry{}, "", err
	}
	n.publish(func() { n.state.Index(e) })
	return n.state.View(e, now), token, nil
}

// signedRegistrationHint names exactly what a remote registrant sends
// instead of an unsigned registration.
const signedRegistrationHint = `{"descriptor": {"agent_id", "node_public_key" (base64 Ed25519), "network_name", "capabilities", ` +
	`"endpoint": {"host", "port", "scheme": "tcp"}, "registered_at", "expires_at", "metadata", ` +
	`"signatures": [{"key_id", "sig"}]}}, an RFC-005 descriptor signed with your node key ` +
	`(capmesh descriptor sign makes one; registry/announce sends it for a capmesh host)`

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (n *Node) probeIdentity(ctx context.Context, ep, name string) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ProbeTimeout)
	defer cancel()
	c, err := n.cfg.Dial(ctx, ep)
	if err != nil {
		return refuse(CodeWordIdentityProbe, "cannot reach %s to check its identity: %v", ep, err)
	}
	defer c.Close()
	var id struct {
		Primal string `json:"primal"`
	}
	if err := c.Call(ctx, "identity.get", map[string]any{}, &id); err != nil {
		// A primal without identity.get: biomeOS infers the primal from
		// its socket's name, and so does the node — for a Unix socket only.
		if code, _ := jsonrpc.ErrorCode(err); code != jsonrpc.MethodNotFound || !strings.EqualFold(endpoint.SocketPrimal(ep), name) {
			return refuse(CodeWordIdentityProbe, "identity.get on %s failed: %v", ep, err)
		}
		return nil
	}
	if !strings.EqualFold(id.Primal, name) {
		return refuse(CodeWordIdentityMismatch, "registering as %q but %s says it is %q", name, ep, id.Primal)
	}
	return nil
}

// Heartbeat renews a local registration's TTL, by name, for its
// registrant only: the caller presents the registration token, or is the
// registrant's process. (A signed registration has nothing to renew —
// descriptors are refreshed by posting a newer one.)
func (n *Node) Heartbeat(ctx context.Context, peer jsonrpc.Peer, name, token string) (time.Time, error) {
	if name == "" {
		return time.Time{}, refuse(CodeWordInvalidParams, "name (or primal_id) is required")
	}
	now := n.cfg.Now()
	n.wmu.Lock()
	defer n.wmu.Unlock()
	e, ok := n.state.Lookup(state.LocalKey(name))
	if !ok || !n.state.Live(e, now) {
		return time.Time{}, refuse(CodeWordNotRegistered, "%q is not registered (register again)", name)
	}
	if !state.AdmittedHere(e.Entry, n.cfg.Machine, n.shared != nil) {
		return time.Time{}, notAdmitted(name)
	}
	if peer.Transport != "unix" || !peer.HasCred || peer.UID != *n.cfg.UID {
		return time.Time{}, refuse(CodeWordForeignUser, "only the node's own user may renew a local registration")
	}
	var lr localRecord
	_ = json.Unmarshal(e.Raw, &lr)
	if !lr.OwnedBy(peer.HasCred, peer.PID, token) {
		return time.Time{}, refuse(CodeWordNotRegistrant, "%q was registered by another process: renew it with its registration_token, from the registrant, or register again", name)
	}
	lr.ExpiresAt = now.Add(n.cfg.LocalTTL).UTC()
	raw, _ := json.Marshal(lr)
	// On a shared store the node's lease keeps the record: a heartbeat
	// touches only memory.
	if n.shared == nil {
		if err := n.st.Apply(ctx, Op{Record: Record{Kind: kindLocal, Key: e.Key, Value: raw, ExpiresAt: lr.ExpiresAt, Machine: e.Machine}}); err != nil {
			return time.Time{}, fmt.Errorf("registry: %w", err)
		}
	}
	ne := state.FromLocal(lr, raw)
	ne.Machine = e.Machine
	n.publish(func() { n.state.Index(ne) })
	return lr.ExpiresAt, nil
}

// Unregister removes a local registration by name. The caller must be
// its registrant (the registration token, or the registrant's process) —
// or the registered endpoint must be gone, so that anyone of the node's
// user may clean up after a host that died.
func (n *Node) Unregister(ctx context.Context, peer jsonrpc.Peer, name, token string) error {
	if peer.Transport != "unix" || !peer.HasCred || peer.UID != *n.cfg.UID {
		return refuse(CodeWordForeignUser, "only the node's own user may remove a local registration over the Unix socket")
	}
	lr, had := n.liveLocal(state.LocalKey(name))
	if had && !lr.OwnedBy(peer.HasCred, peer.PID, token) {
		if token != "" || !n.endpointGone(ctx, lr.Endpoint) {
			return refuse(CodeWordNotRegistrant, "%q was registered by another process, whose endpoint %s is still listening: only its registrant may unregister it", name, lr.Endpoint)
		}
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if cur, live := n.liveLocalLocked(state.LocalKey(name), n.cfg.Now()); live && (!had || cur.TokenHash != lr.TokenHash) {
		return refuse(CodeWordNotRegistrant, "%q was registered again while this unregistration was checked", name)
	}
	if e, ok := n.state.Lookup(state.LocalKey(name)); ok && !state.AdmittedHere(e.Entry, n.cfg.Machine, n.shared != nil) {
		return notAdmitted(name)
	}
	ok, err := n.deregisterLocked(ctx, state.LocalKey(name), EventDeregistered, "ipc.unregister")
	if err != nil {
		return err
	}
	if !ok {
		return refuse(CodeWordNotRegistered, "%q is not registered", name)
	}
	return nil
}

// notAdmitted refuses to renew or remove a local registration this node
// did not admit on its machine (state.AdmittedHere).
func notAdmitted(name string) error {
	return refuse(CodeWordNotRegistered, "%q is not a registration of this node: renew or remove it through the node it was registered with", name)
}

// ResolveName finds a live, trusted entry by name (local first, then a
// descriptor whose agent_id matches).
func (n *Node) ResolveName(name string) (Entry, bool) {
	now := n.cfg.Now()
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.state.ResolveName(name, now)
}
