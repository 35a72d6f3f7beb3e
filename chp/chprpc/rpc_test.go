package chprpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestRPCBinding serves the JSON-RPC binding and a direct capability method
// on a real Unix socket.
func TestRPCBinding(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	m := jsonrpc.Map{}
	for name, h := range Handlers(b) {
		m[name] = h
	}
	m["conformance.echo"] = DirectHandler(b)
	m["conformance.risky"] = DirectHandler(b)
	sock := filepath.Join(t.TempDir(), "chp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := jsonrpc.NewServer(m, nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		sctx, c2 := context.WithTimeout(context.Background(), 2*time.Second)
		defer c2()
		_ = srv.Shutdown(sctx)
		<-served
	}()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	cl := jsonrpc.NewClient(conn, nil)
	defer cl.Close()

	var res chp.InvocationResult
	if err := cl.Call(ctx, "chp.invoke", map[string]any{"capability_id": "conformance.risky", "correlation_id": "rpc-1"}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != chp.OutcomeDenied || res.Denial.Code != chp.CodePolicyBlocked {
		t.Fatalf("chp.invoke: %+v", res)
	}
	// Direct call with correlation in params._meta; the Unix peer is bound as subject.
	var data json.RawMessage
	if err := cl.Call(ctx, "conformance.echo", map[string]any{"value": "hi", "_meta": map[string]any{"correlation_id": "rpc-1"}}, &data); err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"echo":"hi"}` {
		t.Fatalf("direct result %s", data)
	}
	err = cl.Call(ctx, "conformance.risky", map[string]any{"_meta": map[string]any{"correlation_id": "rpc-1"}}, &data)
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != CodeDenied {
		t.Fatalf("direct denied call: %v", err)
	}
	// A direct call's _meta carries a version range, honoured at gate 2.
	err = cl.Call(ctx, "conformance.echo", map[string]any{"value": "hi", "_meta": map[string]any{"correlation_id": "rpc-1", "requested_capability_version": "^2"}}, &data)
	if !errors.As(err, &rpcErr) || rpcErr.Code != CodeDenied || !strings.Contains(rpcErr.Message, chp.CodeCapabilityVersionUnsupported) {
		t.Fatalf("direct call of an unsupported version range: %v", err)
	}
	var replay chp.ReplayResult
	if err := cl.Call(ctx, "chp.replay", map[string]any{"correlation_id": "rpc-1"}, &replay); err != nil {
		t.Fatal(err)
	}
	if replay.EventCount < 5 {
		t.Fatalf("replay has %d events", replay.EventCount)
	}
	var ev chp.EvidenceEvent
	_ = json.Unmarshal(replay.Events[len(replay.Events)-1], &ev)
	if string(ev.Subject) == "" || !json.Valid(ev.Subject) {
		t.Fatalf("subject %s", ev.Subject)
	}
	var v chp.ChainVerification
	if err := cl.Call(ctx, "chp.verify", map[string]any{"correlation_id": "rpc-1"}, &v); err != nil || !v.Valid {
		t.Fatalf("chp.verify: %v %+v", err, v)
	}
	var bundle json.RawMessage
	if err := cl.Call(ctx, "chp.export", map[string]any{"correlation_id": "rpc-1"}, &bundle); err != nil {
		t.Fatal(err)
	}
	if vb, _ := chp.VerifyBundle(bundle, nil); !vb.Valid {
		t.Fatalf("exported bundle: %+v", vb)
	}
	if err := cl.Call(ctx, "chp.export", map[string]any{"correlation_id": "nope"}, &bundle); !errors.As(err, &rpcErr) || rpcErr.Code != CodeNoEvidence {
		t.Fatalf("export of unknown correlation: %v", err)
	}
	// An unknown correlation is not a valid empty chain.
	if err := cl.Call(ctx, "chp.verify", map[string]any{"correlation_id": "nope"}, &v); !errors.As(err, &rpcErr) || rpcErr.Code != CodeNoEvidence {
		t.Fatalf("verify of unknown correlation: %v %+v", err, v)
	}
	if err := cl.Call(ctx, "chp.invoke", []int{1}, &res); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.InvalidParams {
		t.Fatalf("malformed chp.invoke: %v", err)
	}
}

// FuzzObjectHasKey: the quick _meta scan agrees with encoding/json on every
// valid object it claims to have read.
func FuzzObjectHasKey(f *testing.F) {
	for _, s := range []string{`{}`, `{"_meta":{}}`, `{"a":1,"_meta":null}`, `{"\u005fmeta":1}`, `{"a":"_meta","b":{"_meta":1}}`,
		`{"a":[1,{"b":"}"}], "_met\"a":2}`, `{ "x" : true , "y" : -1.5e3 }`, `{"a":}`, `{"a":1,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		if len(obj) == 0 || obj[0] != '{' {
			return
		}
		found, ok := objectHasKey(obj, "_meta")
		var m map[string]json.RawMessage
		if !ok || json.Unmarshal(obj, &m) != nil {
			return
		}
		if _, want := m["_meta"]; found != want {
			t.Fatalf("%s: found=%v, encoding/json says %v", obj, found, want)
		}
	})
}

func TestObjectHasKey(t *testing.T) {
	for in, want := range map[string][2]bool{
		`{}`: {false, true}, `{"_meta":{}}`: {true, true}, `{"a":1,"_meta":null}`: {true, true},
		`{"\u005fmeta":1}`: {true, true}, `{"a":"_meta","b":{"_meta":1}}`: {false, true},
		`{"a":[1,{"b":"}"}], "c":2}`: {false, true}, `{"a":}`: {false, false}, `{"a":1} x`: {false, false},
		`{"a":1`: {false, false}, `{"a" 1}`: {false, false},
	} {
		found, ok := objectHasKey([]byte(in), "_meta")
		if [2]bool{found, ok} != want {
			t.Errorf("%s: found=%v ok=%v, want %v", in, found, ok, want)
		}
	}
}

// TestDirectCallsRecycle: direct calls recycle their invocations, yet what a
// handler keeps — its context, the envelope, the payload — and every answer
// stay intact while other calls run, concurrently, through every outcome.
func TestDirectCallsRecycle(t *testing.T) {
	b, err := boundary.New(boundary.Config{HostID: "recycle", Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	type kept struct {
		ctx     context.Context
		env     *chp.InvocationEnvelope
		corr    string
		payload string
	}
	keep := make(chan kept, 4096)
	handler := func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		env, _ := boundary.InvocationFromContext(ctx)
		keep <- kept{ctx, env, env.Correlation.CorrelationID, string(p)}
		if string(p) == `{"fail":true}` {
			return nil, errors.New("asked to fail")
		}
		return p, nil
	}
	if err := b.Register(boundary.Capability{Descriptor: chp.CapabilityDescriptor{ID: "k.echo", Version: "1", Description: "x"}, Handler: handler}); err != nil {
		t.Fatal(err)
	}
	h := DirectHandler(b)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				params := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				if i%10 == 0 {
					params = `{"fail":true}`
				}
				out, err := h.Handle(context.Background(), &jsonrpc.Request{Method: "k.echo", Params: json.RawMessage(params)})
				if i%10 == 0 {
					var je *jsonrpc.Error
					if !errors.As(err, &je) || je.Code != CodeFailed {
						t.Errorf("failure answered %v %v", out, err)
						return
					}
					var res chp.InvocationResult
					if err := json.Unmarshal(je.Data, &res); err != nil || res.Outcome != chp.OutcomeFailure || len(res.EvidenceIDs) != 2 || res.StartedAt == nil {
						t.Errorf("failure result %+v", res)
					}
					continue
				}
				if raw, _ := out.(json.RawMessage); string(raw) != params || err != nil {
					t.Errorf("answer %s %v, want %s", out, err, params)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(keep)
	seen := map[string]bool{}
	for k := range keep {
		env, _ := boundary.InvocationFromContext(k.ctx)
		if env != k.env || k.env.Correlation.CorrelationID != k.corr || string(k.env.Payload) != k.payload {
			t.Fatalf("a kept context or envelope changed after its call: %s/%s vs %s/%s", env.Correlation.CorrelationID, env.Payload, k.corr, k.payload)
		}
		if k.payload != `{"fail":true}` && seen[k.payload] {
			t.Fatalf("payload %s seen twice", k.payload)
		}
		seen[k.payload] = true
	}
}

// fixtureBoundary is a boundary with the conformance fixture profile.
func fixtureBoundary(t *testing.T, store evidence.Store) *boundary.Boundary {
	t.Helper()
	b, err := boundary.New(boundary.Config{HostID: "test-host", Store: store,
		Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	if err := boundary.RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	return b
}
