package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/chprpc"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

// ExampleRegisterStream is a streaming capability: it sends each word of
// its input as a chunk, then returns the word count. A client invoking it
// with mode "stream" over the host's socket receives the chunks as
// chp.chunk notifications, then the result; the evidence commits the
// chunks' digest, which the client checks.
func ExampleRegisterStream() {
	dir, _ := os.MkdirTemp("", "words")
	defer os.RemoveAll(dir)
	h, err := host.New(host.Info{Name: "words", Version: "1.0.0", Domain: "text", License: "MIT"},
		&host.Config{Socket: filepath.Join(dir, "words.sock"), Ephemeral: true, NoAnnounce: true, Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	type in struct {
		Text string `json:"text"`
	}
	type out struct {
		Words int `json:"words"`
	}
	err = host.RegisterStream(h, "text.words", func(_ context.Context, in in, s *host.Stream) (out, error) {
		words := strings.Fields(in.Text)
		for _, w := range words {
			if err := s.Send(w); err != nil {
				return out{}, err
			}
		}
		return out{Words: len(words)}, nil
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	<-h.Ready()

	var deltas []json.RawMessage
	c, err := jsonrpc.Dial(ctx, "unix", h.Addr("unix"), &jsonrpc.ClientOptions{
		OnNotify: func(method string, params json.RawMessage) {
			var ch chprpc.Chunk
			if method == chprpc.ChunkMethod && json.Unmarshal(params, &ch) == nil {
				fmt.Printf("chunk %d: %s\n", ch.ID, ch.Delta)
				deltas = append(deltas, ch.Delta)
			}
		}})
	if err != nil {
		panic(err)
	}
	var res chp.InvocationResult
	err = c.Call(ctx, "chp.invoke", map[string]any{"capability_id": "text.words", "mode": "stream",
		"payload": map[string]any{"text": "streams end in results"}, "correlation_id": "words-1"}, &res)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, string(res.Data))

	var rep struct {
		Events []struct {
			EventType string          `json:"event_type"`
			Payload   json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	_ = c.Call(ctx, "chp.replay", map[string]any{"correlation_id": "words-1"}, &rep)
	for _, e := range rep.Events {
		if e.EventType == chp.EventCompleted {
			fmt.Println("chunks verify:", chp.VerifyChunkSeq(e.Payload, deltas) == nil)
		}
	}
	c.Close()
	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// chunk 0: "streams"
	// chunk 1: "end"
	// chunk 2: "in"
	// chunk 3: "results"
	// success {"words":4}
	// chunks verify: true
	// stopped: <nil>
}
