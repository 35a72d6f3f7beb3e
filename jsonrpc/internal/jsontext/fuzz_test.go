package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzUnquote checks string decoding against encoding/json.
func FuzzUnquote(f *testing.F) {
	f.Add([]byte(`"plain"`))
	f.Add([]byte(`"\u00e9\ud83d\ude00\ud800x\n\"\\\/"`))
	f.Fuzz(func(t *testing.T, tok []byte) {
		if len(tok) < 2 || tok[0] != '"' {
			return
		}
		end, err := ScanString(tok, 0)
		if err != nil || end != len(tok) {
			return
		}
		var want string
		if err := json.Unmarshal(tok, &want); err != nil {
			t.Fatalf("scanner accepted %q, encoding/json did not: %v", tok, err)
		}
		if got := Unquote(tok); got != want {
			t.Fatalf("unquote(%q) = %q, want %q", tok, got, want)
		}
		// appendString round-trips.
		back := AppendString(nil, want)
		var again string
		if err := json.Unmarshal(back, &again); err != nil || again != strings.ToValidUTF8(want, "\ufffd") {
			t.Fatalf("appendString(%q) = %s -> %q %v", want, back, again, err)
		}
	})
}
