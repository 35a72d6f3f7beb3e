package jsonrpc

import "time"

// Observer receives what a Server does, for metrics. Its methods are
// called synchronously on the server's hot paths, from many goroutines at
// once: they must be safe for concurrent use, quick, and must not block.
// A nil Observer (the default) costs one nil check per event.
type Observer interface {
	// OnRequest reports a finished request: the method as its handler was
	// assigned, or "" when no handler was assigned (the call was answered
	// MethodNotFound); code is 0 on success, else the JSON-RPC error code
	// sent; elapsed is the time spent in the handler (0 for an unknown
	// method). Requests the server rejected before reading a method
	// (parse errors, invalid requests) are not reported here.
	OnRequest(method string, code Code, elapsed time.Duration)
	// OnInFlight reports a handler starting (+1) or finishing (-1).
	OnInFlight(delta int)
	// OnConn reports a connection admitted (+1) or closed (-1) by its
	// transport: "unix", "tcp", "http", or another Peer.Transport.
	OnConn(transport string, delta int)
	// OnRefused reports work refused by a limit; reason is one of the
	// Refused* constants.
	OnRefused(reason string)
}

// Reasons passed to Observer.OnRefused: a bounded set, safe as a metric
// label.
const (
	// RefusedMaxConns: a connection beyond MaxConns/OwnerReserve.
	RefusedMaxConns = "max_conns"
	// RefusedMessageTooLarge: a frame or HTTP body beyond MaxMessageBytes.
	RefusedMessageTooLarge = "message_too_large"
	// RefusedLineTimeout: a message not completed within LineTimeout.
	RefusedLineTimeout = "line_timeout"
	// RefusedReplyTooLarge: a reply beyond MaxReplyBytes (ResponseTooLarge).
	RefusedReplyTooLarge = "reply_too_large"
)

func (s *Server) refused(reason string) {
	if s.obs != nil {
		s.obs.OnRefused(reason)
	}
}

func (s *Server) observeConn(transport string, delta int) {
	if s.obs != nil {
		s.obs.OnConn(transport, delta)
	}
}

func (s *Server) observeUnknown() {
	if s.obs != nil {
		s.obs.OnRequest("", MethodNotFound, 0)
	}
}
