package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestInvalidUTF8IsParseError sends requests whose id (or another string)
// holds bytes that are not UTF-8. The old scanner accepted them and echoed
// the id raw, so the reply was not valid JSON; now the frame is a parse
// error answered with id null, and the connection stays usable.
func TestInvalidUTF8IsParseError(t *testing.T) {
	frames := []string{
		"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"\xff\"}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"a\xc3\"}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"\xed\xa0\x80\"}", // an encoded surrogate
		"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":[\"\xc0\xaf\"],\"id\":1}",
		"[{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"\xfe\"}]",
	}
	const want = `{"jsonrpc":"2.0","error":{"code":-32700,`
	ts := startServer(t, "unix", specMethods(), nil)
	rc := dialRaw(t, ts)
	for _, f := range frames {
		rc.send(f + "\n")
		got := rc.line()
		if !json.Valid([]byte(got)) || !utf8.ValidString(got) || !bytes.HasPrefix([]byte(got), []byte(want)) || !bytes.HasSuffix([]byte(got), []byte(`"id":null}`)) {
			t.Fatalf("reply to %q: %q", f, got)
		}
		rc.send(sentinelReq)
		if got := rc.line(); got != sentinelResp {
			t.Fatalf("connection unusable after %q: %s", f, got)
		}
	}
	// Valid multi-byte ids are still echoed byte for byte.
	rc.send("{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"\xc3\xa9\xf0\x9f\x98\x80\"}\n")
	if got := rc.line(); got != "{\"jsonrpc\":\"2.0\",\"result\":\"pong\",\"id\":\"\xc3\xa9\xf0\x9f\x98\x80\"}" {
		t.Fatalf("multi-byte id: %s", got)
	}
}
