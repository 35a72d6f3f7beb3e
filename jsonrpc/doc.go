// Package jsonrpc is capmesh's JSON-RPC 2.0 engine: the messages and error
// codes of the specification, a Server for stream connections (Unix
// sockets, TCP), and a pipelined Client.
//
// The engine and what surrounds it, as jrpc2 lays out its own:
//
//	jsonrpc            messages, codes, Handler/Assigner, Server, Client,
//	  │                and the binding API (Server.Answer, Server.Listener,
//	  │                Server.Options, EncodeRequest, ParseResponse)
//	  ├─ channel       stream framing: Framing, FrameReader, Newline (the
//	  │                Primal IPC Protocol v3.1's one message per line)
//	  ├─ jhttp         the HTTP binding: Handler (a message per POST body),
//	  │                NewServer and Listener (the server's timeouts and
//	  │                connection budget), Client
//	  └─ internal/
//	       jsontext    the one-pass JSON scanner the decoders share
//	       connbudget  MaxConns and the owner reserve, lingering refusals
//	       outbox      a connection's write side: pending replies,
//	                   in-flight slots, reply bytes, deferred writes
//	       workers     the goroutine pool handlers run on
//
// Arrows point down: channel and the internal packages know nothing of
// the engine; jhttp builds only on the exported binding API, as any other
// binding would.
//
// Every capmesh process — hosts, the node's registry and router, the audit
// tool — speaks through this package. It follows JSON-RPC 2.0 to the letter
// (requests, notifications, batches, ids echoed byte for byte, the five
// standard codes) and is built to stay up under hostile input: frames are
// size-bounded and must be UTF-8, invalid JSON is answered with ParseError
// and the connection stays usable, batches and replies are bounded, a
// started message must complete within a deadline, each connection has a
// bounded number of calls in flight and a write deadline per 64 KiB, the
// owner's Unix socket keeps a reserve of connections no remote peer can
// take, handler panics become InternalError, and Shutdown drains calls in
// flight within a bound. jhttp.NewServer and jhttp.Listener give the HTTP
// bridge the same budget and deadlines. docs/limits.md is the table
// of limits; docs/errors.md the table of codes.
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
