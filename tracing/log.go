package tracing

import (
	"context"
	"log/slog"
)

// Attribute names LogHandler adds.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler wraps h so that every record logged with a context that
// carries a span context (FromContext) — every line logged on behalf of
// a traced call, through the *Context logging methods — gets trace_id and
// span_id attributes. Records without one pass through untouched, so a
// logger built on it is the one logger of a whole program.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(*logHandler); ok {
		return h
	}
	return &logHandler{h: h}
}

type logHandler struct{ h slog.Handler }

func (l *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc, ok := FromContext(ctx); ok {
			r = r.Clone()
			r.AddAttrs(slog.String(LogTraceID, sc.TraceID.String()), slog.String(LogSpanID, sc.SpanID.String()))
		}
	}
	return l.h.Handle(ctx, r)
}

func (l *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{h: l.h.WithAttrs(attrs)}
}

func (l *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h: l.h.WithGroup(name)}
}
