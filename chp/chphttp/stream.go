package chphttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/capmesh/capmesh/chp"
)

// Streaming invocations (chp-http-binding.md "Streaming invocations",
// chp-v0.2.md §13.1): POST /invoke with mode "stream" answers
// text/event-stream — `id: n` / `event: chunk` / `data: {"delta": …}`
// frames, then exactly one `event: result` frame whose data is the
// InvocationResult and whose id is the chunk count — once the first chunk
// exists. An outcome reached before it (a denial, a skip, a sync handler, a
// resume past the last chunk) is the ordinary JSON 200 body. A reconnect
// with the same invocation_id and `Last-Event-ID: n` resumes from chunk n+1
// off the recorded chunks.

// invokeStream answers a mode "stream" invocation.
func (h *binding) invokeStream(w http.ResponseWriter, r *http.Request, env *chp.InvocationEnvelope) {
	after := lastEventID(r.Header.Get("Last-Event-ID"))
	rc := http.NewResponseController(w)
	opened := false
	next := 0 // the id the result frame carries: one past the last chunk id
	var frame []byte
	sink := func(seq int, delta json.RawMessage) error {
		if err := r.Context().Err(); err != nil {
			return err
		}
		if !opened {
			opened = true
			hd := w.Header()
			hd.Set("Content-Type", "text/event-stream")
			hd.Set("Cache-Control", "no-cache")
			hd.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
		}
		next = seq + 1
		frame = appendFrame(frame[:0], seq, "chunk", delta)
		if _, err := w.Write(frame); err != nil {
			return err
		}
		return rc.Flush()
	}
	res, err := h.b.InvokeStream(r.Context(), env, after, sink)
	if !opened {
		h.answerInvoke(w, env, res, err)
		return
	}
	if err != nil {
		// The stream is open: the failure can only be a frame. The
		// client sees no result frame, so it cannot take the stream as
		// answered.
		h.b.Logger().Error("streamed invocation could not be recorded", "invocation_id", env.InvocationID, "err", err)
		data, _ := json.Marshal(map[string]any{"error": map[string]any{"code": "evidence_unavailable",
			"message": "evidence could not be recorded; the invocation was not answered"}})
		_, _ = w.Write(appendFrame(nil, -1, "error", data))
		_ = rc.Flush()
		return
	}
	data, err := json.Marshal(res)
	if err != nil {
		data = []byte(`{"error":{"code":"internal","message":"result encoding failed"}}`)
	}
	_, _ = w.Write(appendFrame(frame[:0], next, "result", data))
	_ = rc.Flush()
}

// appendFrame appends one SSE frame (id omitted when negative). data is
// compact JSON: it holds no line break.
func appendFrame(dst []byte, id int, event string, data []byte) []byte {
	if id >= 0 {
		dst = append(dst, "id: "...)
		dst = strconv.AppendInt(dst, int64(id), 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, "event: "...)
	dst = append(dst, event...)
	dst = append(dst, "\ndata: "...)
	if event == "chunk" {
		dst = append(dst, `{"delta":`...)
		dst = append(dst, data...)
		dst = append(dst, '}')
	} else {
		dst = append(dst, data...)
	}
	return append(dst, "\n\n"...)
}

// lastEventID parses a Last-Event-ID header: the last chunk id a client
// saw. Absent or not a non-negative integer: -1, a stream from the start.
func lastEventID(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// answerInvoke writes the JSON answer of an invocation.
func (h *binding) answerInvoke(w http.ResponseWriter, env *chp.InvocationEnvelope, res *chp.InvocationResult, err error) {
	if errors.Is(err, chp.ErrBadEnvelope) {
		httpError(w, http.StatusBadRequest, "invalid_envelope", err.Error())
		return
	}
	if err != nil {
		h.b.Logger().Error("invocation could not be recorded", "invocation_id", env.InvocationID, "err", err)
		httpError(w, http.StatusInternalServerError, "evidence_unavailable", "evidence could not be recorded; the invocation was not answered")
		return
	}
	writeJSON(w, http.StatusOK, res)
}
