package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capmesh/capmesh/jsonrpc"
)

// FuzzDirectCall feeds arbitrary params to a capability through the host's
// dispatcher (schema validation, CHP boundary, typed decoding, result
// mapping): the answer is a result or a JSON-RPC error with a known code,
// never a panic, and invalid params are always -32602.
func FuzzDirectCall(f *testing.F) {
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"key":"a","value":"b"}`, `{"key":1}`, `{"key":"a","value":"b","ttl":-1}`,
		`{"key":"a","value":"b","_meta":{"correlation_id":"c"}}`, `{"_meta":7}`, `[1,2]`, `"str"`, `{"key":"a","value":"b","ttl":1e400}`} {
		f.Add([]byte(s))
	}
	h := newKVHost(f, nil)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, params []byte) {
		for _, m := range []string{"kv.put", "kv.get"} {
			req := &jsonrpc.Request{ID: json.RawMessage("1"), Method: m, Params: params}
			hd := h.Assign(ctx, m)
			if hd == nil {
				t.Fatalf("%s not assigned", m)
			}
			res, err := hd.Handle(ctx, req)
			if err == nil {
				if _, merr := json.Marshal(res); merr != nil {
					t.Fatalf("%s %q: unencodable result %v", m, params, merr)
				}
				continue
			}
			code, ok := jsonrpc.ErrorCode(err)
			if !ok {
				t.Fatalf("%s %q: error without a code: %v", m, params, err)
			}
			switch code {
			case jsonrpc.InvalidParams, -32004:
			default:
				t.Fatalf("%s %q: unexpected code %d: %v", m, params, code, err)
			}
		}
	})
}
