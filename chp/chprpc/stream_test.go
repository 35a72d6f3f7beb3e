package chprpc

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestRPCStream: over a real Unix socket, chp.invoke with mode "stream"
// sends one chp.chunk notification per chunk, then answers exactly one
// result; the committed digest verifies the notified chunks; a retry
// replays them (replayed:true); last_event_id resumes after that chunk; a
// denial sends no chunk.
func TestRPCStream(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	sock := filepath.Join(t.TempDir(), "chp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := jsonrpc.NewServer(jsonrpc.Map(Handlers(b)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		sctx, c2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer c2()
		_ = srv.Shutdown(sctx)
		<-served
	}()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var chunks []Chunk
	cl := jsonrpc.NewClient(conn, &jsonrpc.ClientOptions{OnNotify: func(method string, params json.RawMessage) {
		if method != ChunkMethod {
			t.Errorf("notification %s", method)
			return
		}
		var c Chunk
		if err := json.Unmarshal(params, &c); err != nil {
			t.Error(err)
		}
		mu.Lock()
		chunks = append(chunks, c)
		mu.Unlock()
	}})
	defer cl.Close()
	// call invokes and returns the chunks notified before the answer.
	call := func(params map[string]any) ([]Chunk, chp.InvocationResult) {
		t.Helper()
		mu.Lock()
		chunks = nil
		mu.Unlock()
		var res chp.InvocationResult
		if err := cl.Call(ctx, "chp.invoke", params, &res); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return chunks, res
	}
	env := map[string]any{"capability_id": "conformance.stream", "mode": "stream", "invocation_id": "inv-rpc", "correlation_id": "rpc-s"}
	got, res := call(env)
	var deltas []json.RawMessage
	for i, c := range got {
		if c.ID != i || c.InvocationID != "inv-rpc" {
			t.Fatalf("chunk %d: %+v", i, c)
		}
		deltas = append(deltas, c.Delta)
	}
	if len(deltas) != 3 || string(deltas[0]) != `"s1"` || string(deltas[2]) != `"s3"` {
		t.Fatalf("chunks %+v", got)
	}
	if res.Outcome != chp.OutcomeSuccess || string(res.Data) != `{"chunks":3,"joined":"s1s2s3"}` || res.Replayed {
		t.Fatalf("result %+v", res)
	}
	var rep struct {
		Events []struct {
			EventType string          `json:"event_type"`
			Payload   json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	if err := cl.Call(ctx, "chp.replay", map[string]any{"correlation_id": "rpc-s"}, &rep); err != nil {
		t.Fatal(err)
	}
	var payload json.RawMessage
	for _, e := range rep.Events {
		if e.EventType == chp.EventCompleted {
			payload = e.Payload
		}
	}
	if err := chp.VerifyChunkSeq(payload, deltas); err != nil {
		t.Fatalf("notified chunks: %v (payload %s)", err, payload)
	}

	got, res = call(env)
	if len(got) != 3 || string(got[1].Delta) != `"s2"` || !res.Replayed {
		t.Fatalf("replay: %+v %+v", got, res)
	}
	env["last_event_id"] = 1
	got, res = call(env)
	if len(got) != 1 || got[0].ID != 2 || string(got[0].Delta) != `"s3"` || !res.Replayed {
		t.Fatalf("resume after 1: %+v %+v", got, res)
	}
	got, res = call(map[string]any{"capability_id": "conformance.risky", "mode": "stream"})
	if len(got) != 0 || res.Outcome != chp.OutcomeDenied {
		t.Fatalf("denied stream: %+v %+v", got, res)
	}
}

// TestRPCStreamWithoutNotifier: a streaming chp.invoke that arrived where
// no notification can be sent (the HTTP bridge) runs as in sync mode and
// answers the terminal result.
func TestRPCStreamWithoutNotifier(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	out, err := Handlers(b)["chp.invoke"].Handle(context.Background(), &jsonrpc.Request{ID: json.RawMessage("1"), Method: "chp.invoke",
		Params: json.RawMessage(`{"capability_id":"conformance.stream","mode":"stream"}`)})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := out.(*chp.InvocationResult)
	if !ok || res.Outcome != chp.OutcomeSuccess || string(res.Data) != `{"chunks":3,"joined":"s1s2s3"}` {
		t.Fatalf("answer %#v", out)
	}
}
