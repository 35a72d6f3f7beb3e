package tracing

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
)

// MetaKey is the member of params._meta that carries the W3C traceparent
// of the caller's span across hops.
const MetaKey = "traceparent"

// TraceID is a W3C trace id: 16 bytes, not all zero when valid.
type TraceID [16]byte

// IsValid reports whether t is not all zero.
func (t TraceID) IsValid() bool { return t != TraceID{} }

// String is t in 32 lowercase hex digits, as CHP's correlation.trace_id
// and the traceparent spell it.
func (t TraceID) String() string { return hex.EncodeToString(t[:]) }

// SpanID is a W3C parent id (span id): 8 bytes, not all zero when valid.
type SpanID [8]byte

// IsValid reports whether s is not all zero.
func (s SpanID) IsValid() bool { return s != SpanID{} }

// String is s in 16 lowercase hex digits.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// FlagSampled is the sampled bit of the trace flags.
const FlagSampled byte = 0x01

// SpanContext identifies a span: what a traceparent carries.
type SpanContext struct {
	TraceID TraceID
	SpanID  SpanID
	// Flags are the W3C trace flags (FlagSampled).
	Flags byte
	// Remote marks a span context received from another process (parsed
	// from a traceparent) rather than started here.
	Remote bool
}

// IsValid reports whether both ids are valid.
func (sc SpanContext) IsValid() bool { return sc.TraceID.IsValid() && sc.SpanID.IsValid() }

// Sampled reports whether the sampled flag is set.
func (sc SpanContext) Sampled() bool { return sc.Flags&FlagSampled != 0 }

// Traceparent formats sc as a version-00 W3C traceparent:
// 00-<trace id>-<span id>-<flags>.
func (sc SpanContext) Traceparent() string {
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], sc.TraceID[:])
	b[35] = '-'
	hex.Encode(b[36:52], sc.SpanID[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{sc.Flags})
	return string(b[:])
}

// ErrTraceparent is wrapped by every ParseTraceparent error.
var ErrTraceparent = errors.New("invalid traceparent")

// ParseTraceparent parses a W3C traceparent (Trace Context, level 1 §3.2):
// a two-digit version other than ff, a 32-digit trace id and a 16-digit
// parent id that are not all zero, two digits of flags, all lowercase hex.
// Version 00 is exactly 55 characters; a later version may append fields
// after a '-', which are ignored. The result is Remote.
func ParseTraceparent(s string) (SpanContext, error) {
	var sc SpanContext
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return sc, errorf("want 00-<32 hex>-<16 hex>-<2 hex>")
	}
	var ver [1]byte
	if !lowerHex(ver[:], s[0:2]) || ver[0] == 0xff {
		return sc, errorf("bad version")
	}
	if len(s) > 55 && (ver[0] == 0 || s[55] != '-') {
		return sc, errorf("trailing data after the flags")
	}
	var flags [1]byte
	if !lowerHex(sc.TraceID[:], s[3:35]) || !lowerHex(sc.SpanID[:], s[36:52]) || !lowerHex(flags[:], s[53:55]) {
		return SpanContext{}, errorf("not lowercase hex")
	}
	if !sc.TraceID.IsValid() || !sc.SpanID.IsValid() {
		return SpanContext{}, errorf("all-zero trace id or parent id")
	}
	sc.Flags, sc.Remote = flags[0], true
	return sc, nil
}

func errorf(why string) error { return &parseError{why} }

type parseError struct{ why string }

func (e *parseError) Error() string        { return ErrTraceparent.Error() + ": " + e.why }
func (e *parseError) Is(target error) bool { return target == ErrTraceparent }

// lowerHex decodes s (lowercase hex only) into dst.
func lowerHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

type ctxKey struct{}

// ContextWith returns ctx carrying sc as the current span context.
func ContextWith(ctx context.Context, sc SpanContext) context.Context {
	return context.WithValue(ctx, ctxKey{}, sc)
}

// FromContext returns the span context ctx carries: the current span's,
// or the remote caller's before any span started here.
func FromContext(ctx context.Context) (SpanContext, bool) {
	sc, ok := ctx.Value(ctxKey{}).(SpanContext)
	return sc, ok && sc.IsValid()
}

// Kind is a span's role in the call (OpenTelemetry's SpanKind).
type Kind uint8

// Span kinds.
const (
	KindInternal Kind = iota
	KindServer
	KindClient
)

// Tracer starts spans; package telemetry implements it with
// OpenTelemetry. Implementations must be safe for concurrent use.
type Tracer interface {
	// Start starts a span named name as a child of the span ctx carries
	// (FromContext, or the implementation's own current span), a root
	// span when there is none, and returns the span with ctx carrying
	// its span context (ContextWith).
	Start(ctx context.Context, name string, kind Kind) (context.Context, Span)
}

// Span is a started span. Its methods are called from the goroutine that
// started it.
type Span interface {
	// SpanContext is the span's identity, what travels to the next hop.
	SpanContext() SpanContext
	// SetAttributes adds attributes (string, integer, float, boolean or
	// duration values; other kinds as their string).
	SetAttributes(attrs ...slog.Attr)
	// End ends the span; a non-nil err marks it failed, with err's text.
	End(err error)
}

// Start starts a span with t, or — when t is nil — returns ctx and a span
// that does nothing, without allocating.
func Start(ctx context.Context, t Tracer, name string, kind Kind) (context.Context, Span) {
	if t == nil {
		return ctx, noop{}
	}
	return t.Start(ctx, name, kind)
}

// NoSpan is a Span that does nothing: what Start returns for a nil
// Tracer.
var NoSpan Span = noop{}

// noop is the span of a nil Tracer.
type noop struct{}

func (noop) SpanContext() SpanContext   { return SpanContext{} }
func (noop) SetAttributes(...slog.Attr) {}
func (noop) End(error)                  {}
