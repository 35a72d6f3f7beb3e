package evlog

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp/witnessing"
	"github.com/capmesh/capmesh/evidence"
)

// appendEvents appends n events, each on its own correlation, to store.
func appendEvents(t *testing.T, store evidence.Store, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		corr := fmt.Sprintf("corr-%06d", i)
		_, err := store.Append(context.Background(), evidence.Pending{CorrelationID: corr, EventType: "e",
			Seal: func(seq uint64, prev string) (string, []byte, error) {
				data := fmt.Appendf(nil, `{"sequence":%d,"correlation":%q,"prev":%q}`, seq, corr, prev)
				h := sha256.Sum256(data)
				return hex.EncodeToString(h[:]), data, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestReceiptSizeBounded: the receipt a witness statement leaves in the
// sidecar does not grow with the log: the same for 2 correlations as for
// 2,000, naming none of them, yet its log size and root are the Merkle
// event log's at the witnessed sequence.
func TestReceiptSizeBounded(t *testing.T) {
	ctx := context.Background()
	store := evidence.NewMemory()
	side := &MemoryWitnessStore{}
	g := New(Config{HostID: "h", Store: store, Now: time.Now, MaxReplayLimit: 100})
	g.SetWitnessStore(side)
	_, key, _ := ed25519.GenerateKey(nil)
	var sizes []int
	for _, n := range []int{2, 1998} {
		appendEvents(t, store, len(sizes)*2, n)
		h, err := g.Head(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := witnessing.NewChainWitness("h", h.Sequence, h.StoreHead, h.RevocationHead, "w", key, "2026-01-01T00:00:00Z")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.AcceptWitness(ctx, raw); err != nil {
			t.Fatal(err)
		}
		rs, _ := side.Receipts(ctx)
		r := rs[len(rs)-1]
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "corr-") {
			t.Fatalf("the receipt names correlations: %s", b)
		}
		root, err := g.log.tree.RootAt(r.LogSize)
		if err != nil || r.LogSize != h.Sequence || r.LogRoot != root.String() || r.Scheme != witnessing.StoreHeadV1 {
			t.Fatalf("receipt %s: log size %d root %s, want %d %s", b, r.LogSize, r.LogRoot, h.Sequence, root)
		}
		sizes = append(sizes, len(b))
	}
	// Only the digits of the sequence and size may differ (2 → 2000).
	if d := sizes[1] - sizes[0]; d > 6 {
		t.Fatalf("the receipt grew from %d to %d bytes with the log", sizes[0], sizes[1])
	}
}

// TestStatementTooLarge: a statement over MaxStatementBytes is refused as
// invalid before it is parsed.
func TestStatementTooLarge(t *testing.T) {
	g := New(Config{HostID: "h", Store: evidence.NewMemory(), Now: time.Now})
	big := []byte(`{"kind":"chain-witness","pad":"` + strings.Repeat("x", MaxStatementBytes) + `"}`)
	if _, err := g.AcceptWitness(context.Background(), big); !errors.Is(err, witnessing.ErrInvalidWitness) {
		t.Fatalf("witness: %v", err)
	}
	if _, err := g.AcceptAnchor(context.Background(), big); !errors.Is(err, witnessing.ErrInvalidWitness) {
		t.Fatalf("anchor: %v", err)
	}
}
