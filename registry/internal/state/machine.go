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
// local-only, and returns what the store must keep with e's record
// (store.Record.Machine): machine, or "" for an endpoint any machine
// reaches alike.
func Stamp(e *Registration, machine string) string {
	if endpoint.LocalOnly(e.Endpoint) {
		e.Machine = machine
	}
	return e.Machine
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
