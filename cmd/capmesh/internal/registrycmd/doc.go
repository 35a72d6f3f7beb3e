// Package registrycmd holds `capmesh registry`: the ipc.* registry of a node
// seen from the command line — list, find, watch (resuming from a revision
// across reconnections), revoke, enroll and invite.
package registrycmd
