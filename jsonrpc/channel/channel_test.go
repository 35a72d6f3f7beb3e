package channel

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/jsonrpc/internal/jsontext"
)

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
			if len(fr2) > max || bytes.IndexByte(fr2, '\n') >= 0 || jsontext.IsBlank(fr2) {
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
			if !jsontext.IsBlank(l) {
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
