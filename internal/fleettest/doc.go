// Package fleettest runs a small capmesh fleet — three `capmesh server`
// processes, built from cmd/capmesh, sharing one etcd (the registry) and
// one PostgreSQL (the evidence), with hosts registered through each — and
// kills one node mid-traffic (issue 23's three-node test). It has tests
// only.
package fleettest
