package endpoint

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzEndpointOf: a provider record from any registry is read without a
// panic, and a tagged Unix endpoint always becomes a usable unix:// address.
func FuzzEndpointOf(f *testing.F) {
	for _, s := range []string{
		`{"endpoint":"/run/x.sock"}`,
		`{"endpoint":{"transport":"uds","path":"/run/x.sock"}}`,
		`{"endpoint":{"transport":"tcp","host":"::1","port":7700}}`,
		`{"endpoint":{"UnixSocket":{"path":"/p"}}}`,
		`{"endpoint":{"unix":"/p"}}`,
		`{"endpoint":"/primal/x","socket_path":"/run/b.sock"}`,
		`{"native_endpoint":"unix:///n.sock"}`,
		`{"endpoint":{"type":1}}`,
		`[]`, `null`, `{"endpoint":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := EndpointOf(json.RawMessage(b))
		if got != EndpointOf(json.RawMessage(b)) {
			t.Fatal("not deterministic")
		}
		if p, ok := strings.CutPrefix(got, "unix://"); ok && p == "" {
			t.Fatalf("empty unix path from %q", b)
		}
	})
}

// FuzzNormalize: any string normalizes or is refused, never panics, and a
// normalized endpoint is a fixed point that Parse accepts.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"/run/x/../y.sock", "unix:///a", "tcp://h:1", "h:1", "[::1]:7700",
		"http://h:1", "https://h/p?q=1", "x.sock", "unix:", "tcp://h:http", ":0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Normalize(s)
		if err != nil {
			return
		}
		if _, err := Parse(n); err != nil {
			t.Fatalf("Normalize(%q) = %q, which Parse refuses: %v", s, n, err)
		}
		if again, err := Normalize(n); err != nil || again != n {
			t.Fatalf("Normalize(%q) = %q, but Normalize(%q) = %q, %v", s, n, n, again, err)
		}
	})
}
