package host_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/capmesh/capmesh/identity"
)

var updateGolden = flag.Bool("update-host-golden", false, "rewrite the host package's golden files")

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type identityKey = identity.PrivateKey

func newIdentityKey(seed []byte) (*identityKey, error) { return identity.NewKeyFromSeed(seed) }

// golden compares got — the exact bytes of a JSON-RPC result as the host
// writes them — with the file (plus a final newline); with
// -update-host-golden it rewrites the file.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if !json.Valid(got) {
		t.Fatalf("%s: not JSON: %s", path, got)
	}
	var buf bytes.Buffer
	buf.Write(got)
	buf.WriteByte('\n')
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-host-golden to create it)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("%s differs from the golden file:\n got %s\nwant %s", path, buf.Bytes(), want)
	}
}

func httpGet(url string) ([]byte, error) {
	res, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, res.Status, b)
	}
	return b, err
}
