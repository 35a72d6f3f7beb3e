package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/capmesh/capmesh/internal/specdata"
)

// specDir is the specification test data copied into the repository.
func specDir(t testing.TB) string {
	t.Helper()
	return specdata.Dir()
}

// ecoFile reads a file below spec/ecoprimals.
func ecoFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(specDir(t), "ecoprimals", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resultOf returns the result member of a recorded JSON-RPC response.
func resultOf(t testing.TB, response []byte) json.RawMessage {
	t.Helper()
	var resp struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(response, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Result == nil {
		t.Fatal("response has no result")
	}
	return resp.Result
}

// specDirOrEmpty is specDir for callers that can do without the data.
func specDirOrEmpty() string { return specdata.Dir() }
