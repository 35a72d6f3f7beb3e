package evlog

import (
	"bytes"
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

// stmt is a statement as the sidecar sees it (the store does not verify).
func stmt(issuer string, seq uint64, n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"sequence":%d,"witness":{"public_key":%q},"anchor":{"did":%q},"n":%d}`, seq, issuer, issuer, n))
}

// TestSidecarBounded: past MaxSidecarEntries, a new issuer is refused with
// ErrWitnessStoreFull, while an issuer already held may still supersede
// its oldest statement with a later one.
func TestSidecarBounded(t *testing.T) {
	ctx := context.Background()
	m := &MemoryWitnessStore{}
	for i := range MaxSidecarEntries {
		if err := m.AddAnchor(ctx, stmt(fmt.Sprintf("did:%d", i/MaxPerIssuer), 1, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.AddAnchor(ctx, stmt("did:new", 1, 0)); !errors.Is(err, ErrWitnessStoreFull) {
		t.Fatalf("anchor past the bound: %v", err)
	}
	if err := m.AddAnchor(ctx, stmt("did:0", 2, 0)); err != nil {
		t.Fatalf("a later statement of a held issuer: %v", err)
	}
	if as, _ := m.Anchors(ctx); len(as) != MaxSidecarEntries {
		t.Fatalf("%d anchors, want %d", len(as), MaxSidecarEntries)
	}
}

// TestSidecarIssuerQuota: one issuer's flood of distinct statements is
// refused past MaxPerIssuer (ErrIssuerQuota) while another issuer still
// gets in; an identical statement is accepted again and kept once; a
// statement over a later sequence supersedes the issuer's oldest, in
// memory and across a reopen of the file sidecar, whose file stays
// bounded however long the issuer goes on.
func TestSidecarIssuerQuota(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := OpenFileWitnessStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, ws := range map[string]WitnessStore{"memory": &MemoryWitnessStore{}, "file": fs} {
		for i := range MaxPerIssuer {
			if err := ws.AddReceipt(ctx, Receipt{Statement: stmt("flood", 5, i)}); err != nil {
				t.Fatal(err)
			}
		}
		for i := MaxPerIssuer; i < 3*MaxPerIssuer; i++ {
			if err := ws.AddReceipt(ctx, Receipt{Statement: stmt("flood", 5, i)}); !errors.Is(err, ErrIssuerQuota) {
				t.Fatalf("%s: statement %d past the quota: %v", name, i, err)
			}
		}
		if err := ws.AddReceipt(ctx, Receipt{Statement: stmt("flood", 4, 99)}); !errors.Is(err, ErrIssuerQuota) {
			t.Fatalf("%s: an older statement at the quota: %v", name, err)
		}
		if err := ws.AddReceipt(ctx, Receipt{Statement: stmt("flood", 5, 0)}); err != nil {
			t.Fatalf("%s: an identical statement: %v", name, err)
		}
		if err := ws.AddReceipt(ctx, Receipt{Statement: stmt("other", 5, 0)}); err != nil {
			t.Fatalf("%s: another issuer: %v", name, err)
		}
		if err := ws.AddReceipt(ctx, Receipt{Statement: stmt("other", 5, 0)}); err != nil {
			t.Fatalf("%s: another issuer again: %v", name, err)
		}
		if rs, _ := ws.Receipts(ctx); len(rs) != MaxPerIssuer+1 {
			t.Fatalf("%s: %d receipts, want %d", name, len(rs), MaxPerIssuer+1)
		}
		for i := range 5 * MaxPerIssuer {
			if err := ws.AddReceipt(ctx, Receipt{Statement: stmt("flood", uint64(10+i), i)}); err != nil {
				t.Fatalf("%s: a later head: %v", name, err)
			}
		}
		rs, _ := ws.Receipts(ctx)
		if len(rs) != MaxPerIssuer+1 {
			t.Fatalf("%s: %d receipts after superseding, want %d", name, len(rs), MaxPerIssuer+1)
		}
		if e, _ := receiptEntry(rs[0]); e.issuer != "witness:other" {
			t.Fatalf("%s: the other issuer's statement was superseded: %s", name, rs[0].Statement)
		}
		if e, _ := receiptEntry(rs[1]); e.seq != 10+4*MaxPerIssuer {
			t.Fatalf("%s: oldest kept flood statement at %d, want the newest %d", name, e.seq, 10+4*MaxPerIssuer)
		}
	}
	again, err := OpenFileWitnessStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fs.Receipts(ctx)
	got, _ := again.Receipts(ctx)
	if len(got) != len(want) || string(got[1].Statement) != string(want[1].Statement) {
		t.Fatalf("reopened: %d receipts, want %d", len(got), len(want))
	}
	data, _ := os.ReadFile(filepath.Join(dir, receiptsFile))
	if lines := bytes.Count(data, []byte("\n")); lines > 3*(MaxPerIssuer+1)+2*MaxPerIssuer {
		t.Fatalf("the file holds %d lines for %d statements: not compacted", lines, len(got))
	}
}
