package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The registry page stays live through Server-Sent Events: /ui/events
// long-polls the node's ipc.watch from the revision the page was rendered
// at and sends a "registry" event whenever it returns events, upon which
// the page's script fetches the table's rows again (server-rendered, so
// escaped like the page). A stream lasts at most streamLife; the browser's
// EventSource reconnects by itself, from the revision it last saw.
const (
	streamLife   = 10 * time.Minute
	watchWait    = 20 * time.Second
	refreshQuiet = time.Minute
)

func (d *Dashboard) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	select {
	case d.streams <- struct{}{}:
		defer func() { <-d.streams }()
	default:
		http.Error(w, "too many open event streams", http.StatusServiceUnavailable)
		return
	}
	since, err := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
	if err != nil {
		since = 0
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		if n, err := strconv.ParseUint(id, 10, 64); err == nil {
			since = n
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), streamLife)
	defer cancel()
	go func() {
		select {
		case <-d.done:
			cancel()
		case <-ctx.Done():
		}
	}()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The first frame says the stream is open (the page marks itself live).
	if _, err := fmt.Fprintf(w, "retry: 2000\nevent: hello\ndata: %d\n\n", since); err != nil {
		return
	}
	_ = rc.Flush()
	sent := time.Now()
	for ctx.Err() == nil {
		var res struct {
			Revision uint64            `json:"revision"`
			Events   []json.RawMessage `json:"events"`
		}
		wctx, wcancel := context.WithTimeout(ctx, watchWait+callTimeout)
		err := d.call(wctx, r, "ipc.watch", map[string]any{"since_revision": since, "wait_ms": watchWait.Milliseconds()}, &res)
		wcancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// A compacted history or a restarted node: the page re-reads the
			// whole table and the stream starts again from the present.
			d.log.Debug("dashboard: ipc.watch", "err", err)
			if _, werr := fmt.Fprintf(w, "event: registry\ndata: resync\n\n"); werr != nil {
				return
			}
			_ = rc.Flush()
			since = 0
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			continue
		}
		since = res.Revision
		// A verdict that lapses by itself (a join certificate reaching its
		// expiry) and the expiry countdowns change without an event: a quiet
		// stream still refreshes the table every refreshQuiet.
		if len(res.Events) == 0 && time.Since(sent) < d.quiet {
			continue
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: registry\ndata: %d\n\n", since, since); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		sent = time.Now()
	}
}
