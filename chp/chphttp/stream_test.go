package chphttp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/evidence"
)

// sseFrame is one server-sent event.
type sseFrame struct {
	id, event string
	data      json.RawMessage
}

// readFrames parses an SSE body into frames.
func readFrames(t *testing.T, r io.Reader) []sseFrame {
	t.Helper()
	var out []sseFrame
	var f sseFrame
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if f.event != "" {
				out = append(out, f)
			}
			f = sseFrame{}
		case strings.HasPrefix(line, "id: "):
			f.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.data = json.RawMessage(line[6:])
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

// streamCall posts an envelope and returns the content type and body.
func streamCall(t *testing.T, url, body, lastEventID string) (string, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/invoke", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, raw)
	}
	return resp.Header.Get("Content-Type"), raw
}

// splitStream returns a stream's chunk deltas and ids and its one result
// frame (failing the test on a second result frame or a frame after it).
func splitStream(t *testing.T, raw []byte) (deltas []json.RawMessage, ids []string, result *chp.InvocationResult, resultID string) {
	t.Helper()
	for _, f := range readFrames(t, bytes.NewReader(raw)) {
		if result != nil {
			t.Fatalf("frame %q after the result frame", f.event)
		}
		switch f.event {
		case "chunk":
			var c struct {
				Delta json.RawMessage `json:"delta"`
			}
			if err := json.Unmarshal(f.data, &c); err != nil {
				t.Fatal(err)
			}
			deltas, ids = append(deltas, c.Delta), append(ids, f.id)
		case "result":
			result = new(chp.InvocationResult)
			if err := json.Unmarshal(f.data, result); err != nil {
				t.Fatal(err)
			}
			resultID = f.id
		default:
			t.Fatalf("unexpected event %q", f.event)
		}
	}
	if result == nil {
		t.Fatalf("no result frame in %s", raw)
	}
	return deltas, ids, result, resultID
}

// completedPayload returns the payload of corr's execution_completed event,
// read back over GET /replay as a client would.
func completedPayload(t *testing.T, url, corr string) json.RawMessage {
	t.Helper()
	resp, err := http.Get(url + "/replay/" + corr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep struct {
		Events []struct {
			EventType string          `json:"event_type"`
			Payload   json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Events {
		if e.EventType == chp.EventCompleted {
			return e.Payload
		}
	}
	t.Fatalf("no execution_completed for %s", corr)
	return nil
}

func strs(ds []json.RawMessage) string {
	var b strings.Builder
	for _, d := range ds {
		b.Write(d)
	}
	return b.String()
}

// TestStreamSSE: mode "stream" answers text/event-stream — one chunk frame
// per delta with ids 0.., then exactly one result frame (id = chunk count)
// — and the chunk_seq_digest the evidence commits, recomputed by the
// verifier over the delivered chunks, matches; a tampered chunk fails.
func TestStreamSSE(t *testing.T) {
	srv := httptest.NewServer(chphttp.Handler(fixtureBoundary(t, nil), nil))
	defer srv.Close()
	ctype, raw := streamCall(t, srv.URL, `{"capability_id":"conformance.stream","mode":"stream","correlation_id":"sse"}`, "")
	if ctype != "text/event-stream" {
		t.Fatalf("content type %q: %s", ctype, raw)
	}
	deltas, ids, res, rid := splitStream(t, raw)
	if strs(deltas) != `"s1""s2""s3"` || strings.Join(ids, ",") != "0,1,2" || rid != "3" {
		t.Fatalf("chunks %s ids %v result id %q", strs(deltas), ids, rid)
	}
	if res.Outcome != chp.OutcomeSuccess || string(res.Data) != `{"chunks":3,"joined":"s1s2s3"}` || res.Replayed {
		t.Fatalf("result %+v", res)
	}
	payload := completedPayload(t, srv.URL, "sse")
	if err := chp.VerifyChunkSeq(payload, deltas); err != nil {
		t.Fatalf("delivered chunks do not verify: %v (payload %s)", err, payload)
	}
	deltas[1] = json.RawMessage(`"s2x"`)
	if err := chp.VerifyChunkSeq(payload, deltas); !errors.Is(err, chp.ErrChunkSeqMismatch) {
		t.Fatalf("tampered chunk log: %v", err)
	}
	// Sync mode on the same capability answers the terminal data, and
	// commits no chunk sequence (only streaming completions carry one).
	ctype, raw = streamCall(t, srv.URL, `{"capability_id":"conformance.stream","correlation_id":"sync"}`, "")
	if ctype != "application/json" || !strings.Contains(string(raw), `"joined":"s1s2s3"`) {
		t.Fatalf("sync mode: %s %s", ctype, raw)
	}
	if p := completedPayload(t, srv.URL, "sync"); strings.Contains(string(p), chp.ChunkSeqDigestKey) {
		t.Fatalf("sync completion carries a chunk digest: %s", p)
	}
}

// TestStreamPreStreamStaysJSON: an outcome decided before the first chunk
// — a policy denial, a sync-only capability's unsupported_mode, a handler
// that fails before its first chunk — is a plain JSON 200, never SSE.
func TestStreamPreStreamStaysJSON(t *testing.T) {
	b := fixtureBoundary(t, nil)
	fail := func(context.Context, json.RawMessage, func(json.RawMessage) error) (json.RawMessage, error) {
		return nil, errors.New("no chunk")
	}
	for _, c := range []boundary.Capability{
		{Descriptor: chp.CapabilityDescriptor{ID: "early.fail", Version: "1", Description: "x", Modes: []string{"stream"}}, Stream: fail},
		{Descriptor: chp.CapabilityDescriptor{ID: "risky.stream", Version: "1", Description: "x", Modes: []string{"stream"}, Risk: "high"},
			Stream: streamOf(`"never"`)},
	} {
		if err := b.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(chphttp.Handler(b, nil))
	defer srv.Close()
	for id, want := range map[string]string{
		"risky.stream":     `"code":"policy_blocked"`,
		"conformance.echo": `"code":"unsupported_mode"`,
		"early.fail":       `"outcome":"failure"`,
	} {
		ctype, raw := streamCall(t, srv.URL, `{"capability_id":"`+id+`","mode":"stream"}`, "")
		if ctype != "application/json" || !strings.Contains(string(raw), want) {
			t.Errorf("%s: %s %s, want JSON with %s", id, ctype, raw, want)
		}
	}
}

// TestStreamReplayAndResume: a retried streaming invocation_id re-streams
// the recorded chunks with replayed:true and appends no evidence; a
// Last-Event-ID reconnect gets only the later chunks, with their absolute
// ids; a Last-Event-ID that is not a chunk id streams from the start; a
// resume past the last chunk is the replayed result as JSON.
func TestStreamReplayAndResume(t *testing.T) {
	store := evidence.NewMemory()
	srv := httptest.NewServer(chphttp.Handler(fixtureBoundary(t, store), nil))
	defer srv.Close()
	body := `{"capability_id":"conformance.stream","mode":"stream","invocation_id":"inv-r","correlation_id":"r"}`
	_, raw := streamCall(t, srv.URL, body, "")
	first, _, res, _ := splitStream(t, raw)
	events := store.LastSequence()

	_, raw = streamCall(t, srv.URL, body, "")
	again, ids, res2, rid := splitStream(t, raw)
	if strs(again) != strs(first) || strings.Join(ids, ",") != "0,1,2" || rid != "3" {
		t.Fatalf("replay: chunks %s ids %v result id %s", strs(again), ids, rid)
	}
	if !res2.Replayed || string(res2.Data) != string(res.Data) {
		t.Fatalf("replayed result %+v", res2)
	}
	_, raw = streamCall(t, srv.URL, body, "0")
	later, ids, res3, rid := splitStream(t, raw)
	if strs(later) != `"s2""s3"` || strings.Join(ids, ",") != "1,2" || rid != "3" || !res3.Replayed {
		t.Fatalf("resume after 0: chunks %s ids %v result id %s", strs(later), ids, rid)
	}
	_, raw = streamCall(t, srv.URL, body, "not-a-number")
	if all, _, _, _ := splitStream(t, raw); strs(all) != strs(first) {
		t.Fatalf("a garbage Last-Event-ID did not stream from the start: %s", strs(all))
	}
	ctype, raw := streamCall(t, srv.URL, body, "2")
	if ctype != "application/json" || !strings.Contains(string(raw), `"replayed":true`) {
		t.Fatalf("resume past the end: %s %s", ctype, raw)
	}
	if n := store.LastSequence(); n != events {
		t.Fatalf("replays appended %d events", n-events)
	}
}

// streamOf is a StreamHandler sending deltas, then returning null.
func streamOf(deltas ...string) boundary.StreamHandler {
	return func(_ context.Context, _ json.RawMessage, send func(json.RawMessage) error) (json.RawMessage, error) {
		for _, d := range deltas {
			if err := send(json.RawMessage(d)); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
}

// TestStreamClientDisconnect: a client that goes away mid-stream does not
// stop the invocation — it runs to its end and its evidence says the client
// disconnected and how many chunks it was sent — and a reconnect with the
// same invocation_id and Last-Event-ID (made while the stream still runs)
// resumes with the rest; the first chunk plus the resumed ones verify
// against the committed digest.
func TestStreamClientDisconnect(t *testing.T) {
	b := fixtureBoundary(t, nil)
	proceed := make(chan struct{})
	const rest = 300
	big := `"` + strings.Repeat("x", 1024) + `"`
	err := b.Register(boundary.Capability{
		Descriptor: chp.CapabilityDescriptor{ID: "slow.stream", Version: "1", Description: "x", Modes: []string{"stream"}},
		Stream: func(ctx context.Context, _ json.RawMessage, send func(json.RawMessage) error) (json.RawMessage, error) {
			if err := send(json.RawMessage(`"first"`)); err != nil {
				return nil, err
			}
			<-proceed
			for range rest {
				if err := send(json.RawMessage(big)); err != nil {
					return nil, err
				}
			}
			return json.RawMessage(`"done"`), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(chphttp.Handler(b, nil))
	defer srv.Close()
	body := `{"capability_id":"slow.stream","mode":"stream","invocation_id":"inv-d","correlation_id":"d"}`
	resp, err := http.Post(srv.URL+"/invoke", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	var frame strings.Builder
	for !strings.HasSuffix(frame.String(), "\n\n") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		frame.WriteString(line)
	}
	if !strings.Contains(frame.String(), `data: {"delta":"first"}`) {
		t.Fatalf("first frame %q", frame.String())
	}
	resp.Body.Close() // mid-body: the connection goes
	close(proceed)

	_, raw := streamCall(t, srv.URL, body, "0")
	resumed, ids, res, rid := splitStream(t, raw)
	if len(resumed) != rest || ids[0] != "1" || rid != "301" || !res.Replayed || string(res.Data) != `"done"` {
		t.Fatalf("resume: %d chunks from id %s, result id %s, %+v", len(resumed), ids[0], rid, res)
	}
	payload := completedPayload(t, srv.URL, "d")
	var p map[string]any
	if err := json.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	sent, _ := p[boundary.ChunksSentKey].(float64)
	if p[boundary.DisconnectedKey] != true || sent < 1 || sent >= rest+1 || p[chp.ChunkCountKey] != float64(rest+1) {
		t.Fatalf("evidence does not record the disconnect: %s", payload)
	}
	all := append([]json.RawMessage{json.RawMessage(`"first"`)}, resumed...)
	if err := chp.VerifyChunkSeq(payload, all); err != nil {
		t.Fatalf("first + resumed chunks: %v", err)
	}
}

// TestStreamBundleVerifies: the exported bundle of a correlation holding
// streamed invocations (two executions and a replay) verifies
// offline, as `capmesh evidence verify` runs it.
func TestStreamBundleVerifies(t *testing.T) {
	key := testKey(t)
	b, err := boundary.New(boundary.Config{HostID: "test-host", Key: key,
		Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	if err := boundary.RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(chphttp.Handler(b, nil))
	defer srv.Close()
	for _, body := range []string{
		`{"capability_id":"conformance.stream","mode":"stream","invocation_id":"inv-b","correlation_id":"b"}`,
		`{"capability_id":"conformance.stream","mode":"stream","invocation_id":"inv-b","correlation_id":"b"}`,
		`{"capability_id":"conformance.stream","mode":"stream","correlation_id":"b"}`,
	} {
		streamCall(t, srv.URL, body, "")
	}
	resp, err := http.Get(srv.URL + "/export/b")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	v, err := chp.VerifyBundle(raw, &chp.VerifyOptions{RequireSigned: true})
	if err != nil || !v.Valid || v.EventCount != 10 { // two executions of five events (safety gate included); the replay adds none
		t.Fatalf("bundle: %v %+v", err, v)
	}
}

// testKey returns a fresh host signing key.
func testKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// failingStore fails every Append once fail is set.
type failingStore struct {
	evidence.Store
	fail atomic.Bool
}

func (s *failingStore) Append(ctx context.Context, batch ...evidence.Pending) ([]evidence.Record, error) {
	if s.fail.Load() {
		return nil, errors.New("disk full")
	}
	return s.Store.Append(ctx, batch...)
}

// TestStreamEvidenceFailureAfterOpen: when the completion cannot be
// recorded after chunks were streamed, the stream ends with an error frame
// and no result frame — the client never sees the invocation as answered.
func TestStreamEvidenceFailureAfterOpen(t *testing.T) {
	store := &failingStore{Store: evidence.NewMemory()}
	b, err := boundary.New(boundary.Config{HostID: "h", Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Register(boundary.Capability{
		Descriptor: chp.CapabilityDescriptor{ID: "s.lost", Version: "1", Description: "x", Modes: []string{"stream"}},
		Stream: func(_ context.Context, _ json.RawMessage, send func(json.RawMessage) error) (json.RawMessage, error) {
			if err := send(json.RawMessage(`"c"`)); err != nil {
				return nil, err
			}
			store.fail.Store(true)
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(chphttp.Handler(b, nil))
	defer srv.Close()
	ctype, raw := streamCall(t, srv.URL, `{"capability_id":"s.lost","mode":"stream"}`, "")
	frames := readFrames(t, bytes.NewReader(raw))
	if ctype != "text/event-stream" || len(frames) != 2 || frames[0].event != "chunk" || frames[1].event != "error" ||
		!strings.Contains(string(frames[1].data), "evidence_unavailable") {
		t.Fatalf("%s: %s", ctype, raw)
	}
}
