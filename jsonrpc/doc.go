// Package jsonrpc is capmesh's JSON-RPC 2.0 engine: the messages and error
// codes of the specification, the newline framing of the Primal IPC
// Protocol v3.1, a Server for stream connections (Unix sockets, TCP) with an
// HTTP bridge, and a pipelined Client.
//
// Every capmesh process — hosts, the node's registry and router, the audit
// tool — speaks through this package. It follows JSON-RPC 2.0 to the letter
// (requests, notifications, batches, ids echoed byte for byte, the five
// standard codes) and is built to stay up under hostile input: frames are
// size-bounded, invalid JSON is answered with ParseError and the connection
// stays usable, each connection has a bounded number of calls in flight and
// a write deadline, handler panics become InternalError, and Shutdown drains
// calls in flight within a bound.
//
// A server:
//
//	methods := jsonrpc.Map{
//		"health.liveness": jsonrpc.HandlerFunc(func(ctx context.Context, r *jsonrpc.Request) (any, error) {
//			return map[string]string{"status": "alive"}, nil
//		}),
//	}
//	srv := jsonrpc.NewServer(methods, nil)
//	err := srv.Serve(ctx, listener) // returns when ctx ends, after draining
//
// A client:
//
//	c, err := jsonrpc.Dial(ctx, "unix", path, nil)
//	var out struct{ Status string }
//	err = c.Call(ctx, "health.liveness", nil, &out)
//
// Errors: a handler returns an *Error (or a bare Code) to choose the code
// sent; errors.Is(err, jsonrpc.MethodNotFound) recognises a code on either
// side of the wire.
package jsonrpc
