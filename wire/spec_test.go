package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// specDir is where the shared specification data lives: beside the checkout
// (the project layout), or wherever CAPMESH_SPEC_DIR points.
func specDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("CAPMESH_SPEC_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "spec")
	}
	if _, err := os.Stat(filepath.Join(dir, "ecoprimals")); err != nil {
		t.Skipf("specification data not found at %s (set CAPMESH_SPEC_DIR): %v", dir, err)
	}
	return dir
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
func specDirOrEmpty() string {
	dir := os.Getenv("CAPMESH_SPEC_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "spec")
	}
	if _, err := os.Stat(filepath.Join(dir, "ecoprimals")); err != nil {
		return ""
	}
	return dir
}
