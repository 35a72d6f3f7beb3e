package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/tracing"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestParseTraceparent(t *testing.T) {
	good := []struct{ in, want string }{
		{tp, tp},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		// A later version may append fields; they are dropped, and the
		// context goes on as version 00.
		{"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", tp},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09"},
	}
	for _, c := range good {
		sc, err := tracing.ParseTraceparent(c.in)
		if err != nil {
			t.Errorf("ParseTraceparent(%q): %v", c.in, err)
			continue
		}
		if !sc.Remote || !sc.IsValid() {
			t.Errorf("ParseTraceparent(%q) = %+v: want a valid remote context", c.in, sc)
		}
		if got := sc.Traceparent(); got != c.want {
			t.Errorf("ParseTraceparent(%q).Traceparent() = %q, want %q", c.in, got, c.want)
		}
	}
	sc, _ := tracing.ParseTraceparent(tp)
	if sc.TraceID.String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID.String() != "00f067aa0ba902b7" || !sc.Sampled() {
		t.Errorf("parsed %+v", sc)
	}
	bad := []string{
		"",
		"00",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",             // version ff is invalid
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",             // uppercase
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",             // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",             // zero span id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",       // 00 is exactly 55
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",            // later version: '-' first
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",             // separator
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",             // not hex
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",             // flags not hex
		"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",             // version not hex
		" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",            // leading space
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\u00e9\u00e9", // trailing bytes
	}
	for _, s := range bad {
		if sc, err := tracing.ParseTraceparent(s); err == nil || !errors.Is(err, tracing.ErrTraceparent) || sc.IsValid() {
			t.Errorf("ParseTraceparent(%q) = %+v, %v: want an ErrTraceparent", s, sc, err)
		}
	}
}

func TestFromMeta(t *testing.T) {
	cases := []struct {
		params string
		ok     bool
	}{
		{`{"key":"k1","_meta":{"hops":1,"traceparent":"` + tp + `"}}`, true},
		{`{"_meta":{"traceparent":"` + tp + `"}}`, true},
		{`{"key":"traceparent"}`, false},
		{`{"_meta":{"traceparent":7}}`, false},
		{`{"_meta":{"traceparent":"00-zz"}}`, false},
		{`{"_meta":"traceparent"}`, false},
		{`{"traceparent":"` + tp + `"}`, false}, // only _meta's counts
		{`["traceparent"]`, false},
		{`{"_meta":{"traceparent":"` + tp + `"}`, false}, // malformed JSON
		{``, false},
	}
	for _, c := range cases {
		sc, ok := tracing.FromMeta([]byte(c.params))
		if ok != c.ok || (ok && sc.Traceparent() != tp) {
			t.Errorf("FromMeta(%s) = %v, %v; want ok=%v", c.params, sc.Traceparent(), ok, c.ok)
		}
	}
}

func TestWithMeta(t *testing.T) {
	sc, _ := tracing.ParseTraceparent(tp)
	cases := []struct{ in, want string }{
		{``, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{`null`, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{`{"q":"<a&b>","_meta":{"hops":2,"traceparent":"old"}}`, `{"_meta":{"hops":2,"traceparent":"` + tp + `"},"q":"<a&b>"}`},
		{`{"_meta":null}`, `{"_meta":{"traceparent":"` + tp + `"}}`},
	}
	for _, c := range cases {
		got, err := tracing.WithMeta(json.RawMessage(c.in), sc)
		if err != nil || string(got) != c.want {
			t.Errorf("WithMeta(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
		if back, ok := tracing.FromMeta(got); !ok || back.TraceID != sc.TraceID {
			t.Errorf("FromMeta(WithMeta(%s)) = %v, %v", c.in, back, ok)
		}
	}
	for _, in := range []string{`[1,2]`, `"s"`, `{"_meta":[1]}`, `{bad`} {
		got, err := tracing.WithMeta(json.RawMessage(in), sc)
		if err == nil || string(got) != in {
			t.Errorf("WithMeta(%s) = %s, %v; want the params unchanged and an error", in, got, err)
		}
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if _, ok := tracing.FromContext(ctx); ok {
		t.Fatal("empty context carries a span context")
	}
	if _, ok := tracing.FromContext(tracing.ContextWith(ctx, tracing.SpanContext{})); ok {
		t.Fatal("an invalid span context counts")
	}
	sc, _ := tracing.ParseTraceparent(tp)
	got, ok := tracing.FromContext(tracing.ContextWith(ctx, sc))
	if !ok || got != sc {
		t.Fatalf("FromContext = %+v, %v", got, ok)
	}
	// A nil Tracer: the context as it was, a span that does nothing.
	c2, sp := tracing.Start(ctx, nil, "x", tracing.KindServer)
	sp.SetAttributes(slog.String("a", "b"))
	sp.End(errors.New("e"))
	if c2 != ctx || sp.SpanContext().IsValid() {
		t.Fatal("nil Tracer started something")
	}
	if n := testing.AllocsPerRun(100, func() {
		_, s := tracing.Start(ctx, nil, "x", tracing.KindServer)
		s.End(nil)
	}); n != 0 {
		t.Errorf("Start with a nil Tracer allocates %v times", n)
	}
}

// TestLogHandler: a line logged with a call's context carries its trace
// id and span id, in text and JSON; a line without one is untouched.
func TestLogHandler(t *testing.T) {
	sc, _ := tracing.ParseTraceparent(tp)
	ctx := tracing.ContextWith(context.Background(), sc)
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		var h slog.Handler = slog.NewTextHandler(&buf, nil)
		if format == "json" {
			h = slog.NewJSONHandler(&buf, nil)
		}
		log := slog.New(tracing.LogHandler(h)).With("component", "test")
		log.InfoContext(ctx, "in a call", "n", 1)
		log.Info("outside any call")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("%s: %d lines: %q", format, len(lines), buf.String())
		}
		want := []string{"trace_id=4bf92f3577b34da6a3ce929d0e0e4736", "span_id=00f067aa0ba902b7"}
		if format == "json" {
			want = []string{`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`, `"span_id":"00f067aa0ba902b7"`}
		}
		for _, w := range want {
			if !strings.Contains(lines[0], w) {
				t.Errorf("%s: %q lacks %s", format, lines[0], w)
			}
		}
		if strings.Contains(lines[1], "trace_id") {
			t.Errorf("%s: %q has a trace id", format, lines[1])
		}
	}
	var buf bytes.Buffer
	h := tracing.LogHandler(slog.NewTextHandler(&buf, nil))
	if tracing.LogHandler(h) != h {
		t.Error("LogHandler wraps twice")
	}
}
