package chprpc

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/jsonrpc"
)

// FuzzDirectCall drives arbitrary params, correlation in _meta included,
// through a direct JSON-RPC call of every fixture capability (and an
// unknown one): the boundary never panics, answers either a JSON result or
// a JSON-RPC error whose code is one of the binding's (or -32602), and
// every correlation it touched still verifies.
func FuzzDirectCall(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `[1,"a"]`, `{"value":"hi"}`,
		`{"_meta":{"correlation_id":"c-1"}}`,
		`{"_meta":{"correlation_id":""},"x":1}`,
		`{"_meta":{"correlation_id":"c-2","idempotency_key":"k"},"value":"\u00e9"}`,
		`{"_meta":null}`, `{"_meta":[]}`, `{"_meta":{"correlation_id":7}}`,
		`{"a":{"_meta":1},"_meta":{"correlation_id":"n"}}`,
		`{"_meta":{"invocation_id":"inv-1"}}`, `{"_meta":{"invocation_id":"inv-1"},"v":2}`,
		`{"fail":true}`, `{"approved":true}`, `{"amount":1e308}`, `"str"`, `17`, `{"\u005f_meta":0}`,
		`{"_meta":{"correlation_id":"\ud800"}}`, `{"x":"` + "\x00" + `"}`, `{"x":1,}`,
	} {
		for m := range uint8(10) {
			f.Add(m, []byte(seed))
		}
	}
	methods := []string{"conformance.approval", "conformance.budgeted", "conformance.echo", "conformance.fail",
		"conformance.guarded", "conformance.risky", "conformance.stream", "conformance.unsafe",
		"conformance.absent", ""}
	codes := map[jsonrpc.Code]bool{CodeDenied: true, CodeFailed: true, CodeSkipped: true, CodeIndeterminate: true,
		CodeEvidenceUnavailable: true, jsonrpc.InvalidParams: true, jsonrpc.MethodNotFound: true}
	b, err := boundary.New(boundary.Config{HostID: "fuzz-host", Store: evidence.NewMemory(), Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()})
	if err != nil {
		f.Fatal(err)
	}
	if err := boundary.RegisterFixtures(b); err != nil {
		f.Fatal(err)
	}
	h := DirectHandler(b)
	f.Fuzz(func(t *testing.T, m uint8, params []byte) {
		ctx := context.Background()
		req := &jsonrpc.Request{Method: methods[int(m)%len(methods)], Params: json.RawMessage(params)}
		out, err := h.Handle(ctx, req)
		var corr string
		if err != nil {
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				t.Fatalf("%s(%q): a plain error %v, not a JSON-RPC error", req.Method, params, err)
			}
			if !codes[je.Code] {
				t.Fatalf("%s(%q): code %d (%s)", req.Method, params, je.Code, je.Message)
			}
			var res chp.InvocationResult
			if len(je.Data) > 0 && json.Unmarshal(je.Data, &res) == nil {
				corr = res.Correlation.CorrelationID
			}
		} else {
			raw, err := json.Marshal(out)
			if err != nil || !json.Valid(raw) {
				t.Fatalf("%s(%q): answer %v does not encode: %v", req.Method, params, out, err)
			}
		}
		if corr != "" {
			v, err := b.Verify(ctx, corr)
			if err != nil {
				t.Fatalf("verify %q: %v", corr, err)
			}
			if !v.Valid {
				t.Fatalf("%s(%q): correlation %q no longer verifies: %+v", req.Method, params, corr, v)
			}
		}
	})
}
