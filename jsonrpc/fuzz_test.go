package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
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

// FuzzReadFrame feeds arbitrary streams to the newline frame reader: it
// never panics, never returns a frame over the limit or containing a
// newline, and returns every non-blank line of a stream within the limit.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\r\n{\"b\":2}\r\n"), 16)
	f.Add([]byte("\xEC\x01{}\n"), 8)
	f.Add([]byte("   \n\n\nx"), 4)
	f.Add([]byte(strings.Repeat("a", 100)+"\n"), 10)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<16 {
			max = 64
		}
		fr := Newline.NewReader(bytes.NewReader(data), max)
		var got [][]byte
		for range len(data) + 2 {
			fr2, err := fr.ReadFrame()
			if err != nil {
				var tl *FrameTooLargeError
				if errors.As(err, &tl) {
					return
				}
				if err != io.EOF {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
			if len(fr2) > max || bytes.IndexByte(fr2, '\n') >= 0 || isBlank(fr2) {
				t.Fatalf("bad frame %q (max %d)", fr2, max)
			}
			got = append(got, append([]byte(nil), fr2...))
		}
		// Reference split.
		in := data
		if len(in) >= 2 && in[0] == 0xEC && in[1] == 0x01 {
			in = in[2:]
		}
		var want [][]byte
		for _, l := range bytes.Split(in, []byte("\n")) {
			l = bytes.TrimSuffix(l, []byte("\r"))
			if !isBlank(l) {
				want = append(want, l)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("got %d frames, want %d: %q vs %q", len(got), len(want), got, want)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d = %q, want %q", i, got[i], want[i])
			}
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

// errWouldBlock stands for a read that would wait for the peer.
var errWouldBlock = errors.New("would block")

// chunkReader returns data in reads of at most n bytes, then errWouldBlock
// for ever: a peer that sent data and is now silent.
type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, errWouldBlock
	}
	k := min(len(p), r.n, len(r.data))
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

// FuzzReady checks the frame reader's Ready and Begun against what
// ReadFrame then does (Begun: a frame started but not whole buffered): when Ready reports a whole frame buffered, ReadFrame returns one
// without reading; once the peer has nothing more to send, ReadFrame
// returns a frame exactly when Ready said so. A Ready that answers true
// too eagerly makes the server hold replies back; one that answers false
// too eagerly only costs an extra write.
func FuzzReady(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\n{\"b\""), 5)
	f.Add([]byte("{}\r\n\n"), 1)
	f.Add([]byte("\xEC\x01\n{}\n \n"), 3)
	f.Add([]byte("{} \n \t\r\n{\"jsonrpc\":"), 64)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		if chunk <= 0 || chunk > 1<<16 {
			chunk = 7
		}
		cr := &chunkReader{data: data, n: chunk}
		fr := Newline.NewReader(cr, 1<<20)
		for range len(data) + 2 {
			ready, begun := fr.Ready(), fr.Begun()
			if ready && begun {
				t.Fatal("Ready and Begun at once")
			}
			exhausted := len(cr.data) == 0
			_, err := fr.ReadFrame()
			if ready && err != nil {
				t.Fatalf("Ready() but ReadFrame failed: %v", err)
			}
			if exhausted && !ready && err == nil {
				t.Fatal("ReadFrame returned a frame that Ready() did not see")
			}
			if exhausted && !begun && !ready && fr.Buffered() > 0 && err == nil {
				t.Fatal("a frame came from input Begun called blank")
			}
			if err != nil && !errors.Is(err, errWouldBlock) {
				t.Fatalf("unexpected error %v", err)
			}
		}
	})
}
