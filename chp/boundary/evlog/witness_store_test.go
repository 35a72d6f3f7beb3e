package evlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestFileWitnessStoreTornLine: a statement cut short by a crash is
// dropped at open; the ones before it survive; damage before the last
// line is an error, not silent loss.
func TestFileWitnessStoreTornLine(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ws, err := OpenFileWitnessStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := ws.AddReceipt(ctx, Receipt{Statement: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "witnesses.jsonl")
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"statement":{"n":`)
	f.Close()
	ws, err = OpenFileWitnessStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rs, _ := ws.Receipts(ctx); len(rs) != 2 {
		t.Fatalf("%d receipts after a torn line, want 2", len(rs))
	}
	data, _ := os.ReadFile(path)
	_ = os.WriteFile(path, append([]byte("{broken\n"), data...), 0o600)
	if _, err := OpenFileWitnessStore(dir); err == nil {
		t.Fatal("a damaged line before the end was ignored")
	}
}

// TestSidecarBounded: the sidecar refuses statements past
// MaxSidecarEntries with ErrWitnessStoreFull.
func TestSidecarBounded(t *testing.T) {
	ctx := context.Background()
	m := &MemoryWitnessStore{}
	for range MaxSidecarEntries {
		if err := m.AddAnchor(ctx, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.AddAnchor(ctx, json.RawMessage(`{}`)); !errors.Is(err, ErrWitnessStoreFull) {
		t.Fatalf("anchor past the bound: %v", err)
	}
}
