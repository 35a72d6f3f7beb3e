package jsonrpc

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"unicode/utf8"

	"github.com/capmesh/capmesh/jsonrpc/internal/jsontext"
	"github.com/capmesh/capmesh/jsonrpc/internal/spectest"
)

// FuzzDecodeFrame checks the frame decoder against encoding/json: a frame
// is a parse error exactly when json.Valid rejects it or it is not UTF-8
// (encoding/json accepts invalid UTF-8 inside strings; RFC 8259 does not), decoding never
// panics, and whatever the server answers is itself valid JSON.
func FuzzDecodeFrame(f *testing.F) {
	for _, tc := range spectest.Cases {
		f.Add([]byte(tc.Req))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"a\u0062c","params":{"x":[1,{"y":null}]},"id":"\ud83d\ude00"}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","method":"ping","id":1},{},3,{"a":[]}]`))
	srv := NewServer(specMethods(), &ServerOptions{Logger: newTestLogger(io.Discard), MaxBatch: 3, MaxReplyBytes: 200})
	f.Fuzz(func(t *testing.T, data []byte) {
		single, batch, isBatch, perr := decodeFrame(data, 0)
		valid := json.Valid(data) && utf8.Valid(data)
		if (perr != nil && perr.Code == ParseError) == valid {
			t.Fatalf("json.Valid=%v but decodeFrame perr=%v for %q", valid, perr, data)
		}
		// With a batch bound the frame is exactly as valid; a batch over
		// the bound is refused whole.
		_, lb, _, lperr := decodeFrame(data, 2)
		if (lperr != nil && lperr.Code == ParseError) != (perr != nil && perr.Code == ParseError) {
			t.Fatalf("batch bound changed validity: %v vs %v for %q", lperr, perr, data)
		}
		if isBatch && len(batch) > 2 && (lperr == nil || lperr.Code != InvalidRequest || lb != nil) {
			t.Fatalf("batch of %d under bound 2: %v", len(batch), lperr)
		}
		check := func(in inbound) {
			if in.err == nil {
				if in.req.ID != nil && !json.Valid(in.req.ID) {
					t.Fatalf("id %q not valid JSON", in.req.ID)
				}
				if in.req.Params != nil && (!json.Valid(in.req.Params) || (in.req.Params[0] != '{' && in.req.Params[0] != '[')) {
					t.Fatalf("params %q", in.req.Params)
				}
			}
		}
		if isBatch {
			for _, in := range batch {
				check(in)
			}
		} else if perr == nil {
			check(single)
		}
		out := srv.Answer(context.Background(), data)
		if out != nil && (!json.Valid(out) || !utf8.Valid(out)) {
			t.Fatalf("response %q to %q is not valid JSON", out, data)
		}
	})
}

// FuzzDecodeClientMsg checks the client's one-pass decoder against
// encoding/json: an object is accepted exactly when json.Valid accepts it,
// and decoding never panics.
func FuzzDecodeClientMsg(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","result":{"a":[1,2]},"id":1}`))
	f.Add([]byte(`{"jsonrpc":"2.0","error":{"code":-32601,"message":"x","data":null},"id":"a"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"ev\u0065nt","params":{"seq":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		i := jsontext.SkipSpace(data, 0)
		if i >= len(data) || data[i] != '{' {
			return
		}
		_, end, err := decodeClientMsg(data, i)
		valid := json.Valid(data)
		ok := err == nil && jsontext.SkipSpace(data, end) == len(data)
		if ok != valid {
			t.Fatalf("decodeClientMsg ok=%v, json.Valid=%v for %q", ok, valid, data)
		}
	})
}
