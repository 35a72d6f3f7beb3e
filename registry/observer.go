package registry

// Observer receives what a registry Node does, for metrics (package
// telemetry implements it). Its methods are called synchronously from many
// goroutines at once: they must be safe for concurrent use, quick, and
// must not block — in particular they must not call back into the Node.
type Observer interface {
	// OnChange reports a committed registry change: an Event* kind
	// (registered, replaced, expired, revoked, deregistered).
	OnChange(kind string)
	// OnTrustChange reports a change of the network's trust state:
	// "enrolled" (a join certificate issued) or "revoked" (a CRL entry).
	OnTrustChange(kind string)
	// OnRoute reports a call the router handled: its Route* outcome and
	// the hop count it was forwarded with (0 when it was not forwarded).
	OnRoute(outcome string, hops int)
	// OnStoreError reports a failed Store operation: "apply", "list" or
	// "purge".
	OnStoreError(op string)
	// OnRateLimited reports an HTTP write refused by a per-client rate
	// limit (429), by group: "agents", "join" or "admin".
	OnRateLimited(group string)
}

// Outcomes of a routed call, passed to Observer.OnRoute: a bounded set.
const (
	RouteOK            = "ok"             // the provider answered with a result
	RouteProviderError = "provider_error" // the provider answered with an error
	RouteNoProvider    = "no_provider"    // no live, trusted provider
	RouteRefused       = "refused"        // bad params or the hop limit
	RouteUnreachable   = "unreachable"    // no provider could be reached
)

// Size is the registry's current size, cheap to read.
type Size struct {
	// Entries are the registrations held (live, any trust).
	Entries int
	// Capabilities are the distinct capability tags they offer.
	Capabilities int
	// Revision is the registry version (the last change's revision).
	Revision uint64
}

// Size returns the registry's current size under the readers' lock.
func (n *Node) Size() Size {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return Size{Entries: n.state.Len(), Capabilities: n.state.Capabilities(), Revision: n.state.Version}
}

func (n *Node) observeTrust(kind string) {
	if n.cfg.Observer != nil {
		n.cfg.Observer.OnTrustChange(kind)
	}
}
