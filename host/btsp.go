package host

import (
	"context"
	"encoding/json"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// btspVersion is the BTSP version named in transport_security and in the
// rejection (the standard's example value).
const btspVersion = "2.0"

// errBTSPRequired is the Capability Wire Standard's rejection of a
// plaintext JSON-RPC message on a family-scoped socket, byte for byte: the
// server writes it as
//
//	{"jsonrpc":"2.0","error":{"code":-32600,"message":"BTSP handshake required","data":{"reason":"This socket is family-scoped and requires a BTSP handshake before JSON-RPC traffic.","btsp_version":"2.0"}},"id":null}
var errBTSPRequired = &jsonrpc.Error{
	Code:    jsonrpc.InvalidRequest,
	Message: "BTSP handshake required",
	Data:    json.RawMessage(`{"reason":"This socket is family-scoped and requires a BTSP handshake before JSON-RPC traffic.","btsp_version":"2.0"}`),
}

// btspEnforced reports whether this host refuses plaintext JSON-RPC: it
// was asked to (RequireBTSP) and runs family-scoped.
func (h *Host) btspEnforced() bool {
	return h.cfg.RequireBTSP && endpoint.FamilyID() != ""
}

// btspGate is the server's ConnGate under TS-01. capmesh does not speak
// the BTSP handshake yet, so whatever a connection sends first is answered
// with the rejection and the connection closed — a clear signal, never a
// silent drop.
func btspGate(context.Context, jsonrpc.Peer, []byte) *jsonrpc.Error {
	return errBTSPRequired
}
