// Package sysconn holds what the JSON-RPC engine asks of the operating
// system about a connection: the peer credentials of a Unix socket and
// the error of a process out of file descriptors.
package sysconn
