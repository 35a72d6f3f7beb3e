package jsonrpc

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/capmesh/capmesh/jsonrpc/internal/jsontext"
)

// TestRepliesNotHeldBack splits request streams at every byte position and
// checks that every request complete in the first part is answered before
// the rest is sent, whatever follows its newline in the same read: a blank
// line, "\r\n" then "\n", spaces, or the start of the next request (what a
// pipelining client sends). The old reader deferred its writes while any
// byte was buffered and so held the reply until the next complete line.
func TestRepliesNotHeldBack(t *testing.T) {
	m := Map{
		"ping":  HandlerFunc(func(context.Context, *Request) (any, error) { return "pong", nil }),
		"iping": Inline(HandlerFunc(func(context.Context, *Request) (any, error) { return "pong", nil })),
	}
	ts := startServer(t, "unix", m, nil)
	seps := []string{"\n", "\r\n", "\n\n", "\r\n\n", "\n\r\n", "\n ", " \n", "\n\t \r\n", "\n \n\n", "\r\n \r\n"}
	for _, method := range []string{"ping", "iping"} {
		req := func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"id":%d}`, method, id)
		}
		streams := make([]string, 0, len(seps)+1)
		for _, sep := range seps {
			streams = append(streams, req(1)+sep+req(2)+"\n")
		}
		// A batch followed by the start of a request.
		streams = append(streams, "["+req(1)+"]\n"+req(2)+"\n")
		for _, s := range streams {
			rc := dialRaw(t, ts)
			for p := 1; p < len(s); p++ {
				head, tail := s[:p], s[p:]
				rc.send(head)
				for i := range completeFrames(head) {
					if got := rc.line(); !bytes.Contains([]byte(got), []byte(`"pong"`)) {
						t.Fatalf("%q split at %d: reply %d: %s", s, p, i, got)
					}
				}
				rc.send(tail)
				for range 2 - completeFrames(head) {
					rc.line()
				}
			}
			_ = rc.c.Close()
		}
	}
}

// completeFrames counts the non-blank lines of s that end in '\n'.
func completeFrames(s string) int {
	n := 0
	for {
		i := bytes.IndexByte([]byte(s), '\n')
		if i < 0 {
			return n
		}
		if !jsontext.IsBlank([]byte(s[:i])) {
			n++
		}
		s = s[i+1:]
	}
}
