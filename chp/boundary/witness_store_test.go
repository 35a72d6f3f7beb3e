package boundary

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/merkle"
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
	m := &memorySidecar{}
	for range MaxSidecarEntries {
		if err := m.AddAnchor(ctx, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.AddAnchor(ctx, json.RawMessage(`{}`)); !errors.Is(err, ErrWitnessStoreFull) {
		t.Fatalf("anchor past the bound: %v", err)
	}
}

// TestLogWhileInvoking: heads and proofs taken while other goroutines
// invoke verify against their own signed heads (run under -race).
func TestLogWhileInvoking(t *testing.T) {
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	pub, _ := identity.ParsePublicKey(key.Public().(ed25519.PublicKey))
	b := signedFixture(t, evidence.NewMemory(), key)
	echo(t, b, "seed")
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "conformance.echo",
					Payload:     json.RawMessage(`{"value":"x"}`),
					Correlation: chp.CorrelationContext{CorrelationID: fmt.Sprintf("w%d-%d", w, i%4)}})
				if err != nil || !res.Success {
					t.Errorf("invoke: %v", err)
					return
				}
			}
		}()
	}
	var held merkle.SignedTreeHead
	for range 30 {
		h, err := b.LogHead(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.LogConsistency(ctx, held.TreeSize, h.TreeSize)
		if err != nil {
			t.Fatal(err)
		}
		if held.TreeSize > 0 {
			if err := merkle.VerifyConsistency(pub, held, c.Second, c.Proof); err != nil {
				t.Fatalf("%d → %d: %v", held.TreeSize, h.TreeSize, err)
			}
		}
		p, err := b.LogInclusion(ctx, 1, h.TreeSize)
		if err != nil {
			t.Fatal(err)
		}
		if err := merkle.VerifyInclusion(pub, p.Head, merkle.LeafHash(p.Event), p.Proof); err != nil {
			t.Fatal(err)
		}
		held = h
	}
	wg.Wait()
}
