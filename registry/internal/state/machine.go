package state

import "github.com/capmesh/capmesh/endpoint"

// A registration naming an endpoint that only its own machine reaches
// (endpoint.LocalOnly: a Unix socket, loopback, localhost) means that
// machine's service. In a fleet spanning machines every node learns it
// through the shared store; dialled on another machine it would reach
// that machine's service of the same address instead. So the admitting
// machine is stored with the record (store.Record.Machine) and nodes of
// other machines list the registration but never dial it.

// Stamp records machine, the admitting node's, in e when e's endpoint is
// local-only or e is a local registration (made over the node's Unix
// socket: its endpoint is this machine's whatever it names), and returns
// what the store must keep with e's record (store.Record.Machine):
// machine, or "" for a signed descriptor naming an endpoint any machine
// reaches alike.
func Stamp(e *Registration, machine string) string {
	if e.Source == SourceLocal || endpoint.LocalOnly(e.Endpoint) {
		e.Machine = machine
	}
	return e.Machine
}

// MayReachHere reports whether a dial of e's endpoint on the machine here
// may connect to this machine itself (a Unix socket, loopback, link-local:
// endpoint.RefuseLocal otherwise): e was admitted here — stamped with this
// machine, or, unstamped on a node's own store, a local registration or a
// descriptor whose endpoint's text is local-only (which only a registrant
// on this machine may name). A signed descriptor naming a host that
// merely resolves to this machine (an /etc/hosts entry, 127.0.0.1.nip.io)
// never may: its registrant could be anywhere.
func MayReachHere(e Entry, here string, shared bool) bool {
	if e.Machine != "" {
		return e.Machine == here
	}
	return !shared && (e.Source == SourceLocal || endpoint.LocalOnly(e.Endpoint))
}

// LocalElsewhere reports whether e's endpoint must not be dialled on the
// machine here: it is local-only and e was admitted on another machine.
// A registration without a recorded machine is this machine's on a store
// of one node (every record of it was admitted here), and another
// machine's on a shared store (a record of a node that did not record
// machines: nothing says it is this machine's).
func LocalElsewhere(e Entry, here string, shared bool) bool {
	if !endpoint.LocalOnly(e.Endpoint) {
		return false
	}
	if e.Machine == "" {
		return shared
	}
	return e.Machine != here
}
