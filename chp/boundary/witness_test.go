package boundary

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/chp/witnessing"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/evidence/sqlite"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/internal/specdata"
	"github.com/capmesh/capmesh/merkle"
)

const witnessedAt = "2026-01-01T00:00:00Z"

func signedFixture(t *testing.T, store evidence.Store, key ed25519.PrivateKey) *Boundary {
	t.Helper()
	b, err := New(Config{HostID: "test-host", Store: store, Key: key, Policy: FixturePolicy(), Safety: FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func echo(t *testing.T, b *Boundary, corr string) {
	t.Helper()
	res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "conformance.echo",
		Payload: json.RawMessage(`{"value":"x"}`), Correlation: chp.CorrelationContext{CorrelationID: corr}})
	if err != nil || !res.Success {
		t.Fatalf("echo: %v %+v", err, res)
	}
}

func head(t *testing.T, b *Boundary, scheme string) *witnessing.StoreHead {
	t.Helper()
	h, err := b.Head(context.Background(), scheme)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func witness(t *testing.T, host string, seq uint64, sh, rev string) []byte {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(nil)
	raw, err := witnessing.NewChainWitness(host, seq, sh, rev, "w", key, witnessedAt)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

type fixedRevocations []string

func (f fixedRevocations) RevocationIDs(context.Context) ([]string, error) { return f, nil }

// TestAcceptWitnessRefusals: POST /witness's every refusal, each leaving
// nothing in the sidecar, and the acceptances (v1, v2, an old sequence).
func TestAcceptWitnessRefusals(t *testing.T) {
	ctx := context.Background()
	b := fixtureBoundary(t, evidence.NewMemory())
	side := new(evlog.MemoryWitnessStore)
	b.SetWitnessStore(side)
	echo(t, b, "c1")
	old := head(t, b, "")
	echo(t, b, "c2")
	echo(t, b, "c0")
	cur, cur2 := head(t, b, ""), head(t, b, witnessing.StoreHeadV2)
	if cur.Sequence <= old.Sequence || cur.RevocationHead != witnessing.EmptyRevocationHead {
		t.Fatalf("heads: %+v %+v", old, cur)
	}
	if h, err := b.HeadAt(ctx, "", old.Sequence); err != nil || h.StoreHead != old.StoreHead || h.Sequence != old.Sequence {
		t.Fatalf("the head as of an old sequence is not the one served then: %v %+v", err, h)
	}
	tampered := strings.Replace(string(witness(t, "test-host", cur.Sequence, cur.StoreHead, "")), `"sequence":`, `"sequence":1`, 1)
	for name, tc := range map[string]struct {
		raw  []byte
		want error
	}{
		"bad signature":         {[]byte(tampered), witnessing.ErrInvalidWitness},
		"not json":              {[]byte(`{"kind":`), witnessing.ErrInvalidWitness},
		"another host":          {witness(t, "other", cur.Sequence, cur.StoreHead, ""), witnessing.ErrInvalidWitness},
		"wrong head":            {witness(t, "test-host", cur.Sequence, strings.Repeat("0", 64), ""), evlog.ErrHeadMismatch},
		"current head, old seq": {witness(t, "test-host", old.Sequence, cur.StoreHead, ""), evlog.ErrHeadMismatch},
		"past the log":          {witness(t, "test-host", cur.Sequence+1, cur.StoreHead, ""), evlog.ErrHeadMismatch},
		"wrong revocation head": {witness(t, "test-host", cur.Sequence, cur.StoreHead, strings.Repeat("a", 64)), evlog.ErrRevocationHeadMismatch},
	} {
		if _, err := b.AcceptWitness(ctx, tc.raw); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	if ws, _ := b.Witnesses(ctx); len(ws) != 0 {
		t.Fatalf("refused statements were kept: %d", len(ws))
	}
	for name, raw := range map[string][]byte{
		"v1":         witness(t, "test-host", cur.Sequence, cur.StoreHead, ""),
		"v2":         witness(t, "test-host", cur2.Sequence, cur2.StoreHead, ""),
		"old head":   witness(t, "test-host", old.Sequence, old.StoreHead, ""),
		"revocation": witness(t, "test-host", cur.Sequence, cur.StoreHead, witnessing.EmptyRevocationHead),
	} {
		if _, err := b.AcceptWitness(ctx, raw); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	ws, _ := b.Witnesses(ctx)
	if len(ws) != 4 {
		t.Fatalf("%d statements served, want 4", len(ws))
	}
	// A host holding revocations: the empty-set head no longer matches.
	ids := fixedRevocations{"k\x00abc"}
	b.SetRevocationSource(ids)
	if h := head(t, b, ""); h.RevocationHead != witnessing.RevocationHead(ids) {
		t.Fatalf("revocation head %s", h.RevocationHead)
	}
	if _, err := b.AcceptWitness(ctx, witness(t, "test-host", cur.Sequence, cur.StoreHead, witnessing.EmptyRevocationHead)); !errors.Is(err, evlog.ErrRevocationHeadMismatch) {
		t.Fatalf("stale revocation head: %v", err)
	}
	if _, err := b.AcceptWitness(ctx, witness(t, "test-host", cur.Sequence, cur.StoreHead, witnessing.RevocationHead(ids))); err != nil {
		t.Fatal(err)
	}
	rs, _ := side.Receipts(ctx)
	last := rs[len(rs)-1]
	if last.LogSize == 0 || last.LogRoot == "" || last.RevocationCount == nil || *last.RevocationCount != 1 {
		t.Fatalf("receipt snapshot: %+v", last)
	}
}

func anchor(t *testing.T, key ed25519.PrivateKey, host string, seq uint64, sh string) []byte {
	t.Helper()
	msg, err := witnessing.StoreHeadAnchorMessage(host, seq, sh, witnessedAt)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := witnessing.SignSSHSIG(key, msg, witnessing.AnchorNamespace)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(witnessing.StoreHeadAnchor{Kind: witnessing.KindStoreHeadAnchor, HostID: host, Sequence: seq, StoreHead: sh,
		AnchoredAt: witnessedAt, Anchor: witnessing.AnchorBlock{Type: "did", DID: witnessing.DIDKey(key.Public().(ed25519.PublicKey)), Countersignature: sig}})
	return raw
}

// TestAcceptAnchorTampered: an anchor's countersignature is verified
// offline; a tampered one, one by another key, or one over a head the host
// does not hold is refused and not kept.
func TestAcceptAnchorTampered(t *testing.T) {
	ctx := context.Background()
	b := fixtureBoundary(t, evidence.NewMemory())
	echo(t, b, "c1")
	h := head(t, b, "")
	_, key, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	good := anchor(t, key, "test-host", h.Sequence, h.StoreHead)
	var a witnessing.StoreHeadAnchor
	_ = json.Unmarshal(good, &a)
	a.Anchor.DID = witnessing.DIDKey(other.Public().(ed25519.PublicKey))
	otherDID, _ := json.Marshal(a)
	sigAt := strings.Index(string(good), "SIGNATURE-----\\n") + len("SIGNATURE-----\\n") + 60
	flipped := []byte(string(good[:sigAt]) + string(rune(good[sigAt]^1)) + string(good[sigAt+1:]))
	for name, tc := range map[string]struct {
		raw  []byte
		want error
	}{
		"tampered countersignature": {flipped, witnessing.ErrInvalidWitness},
		"another did":               {otherDID, witnessing.ErrInvalidWitness},
		"another host":              {anchor(t, key, "other", h.Sequence, h.StoreHead), witnessing.ErrInvalidWitness},
		"wrong head":                {anchor(t, key, "test-host", h.Sequence, strings.Repeat("1", 64)), evlog.ErrHeadMismatch},
	} {
		if _, err := b.AcceptAnchor(ctx, tc.raw); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	if as, _ := b.Anchors(ctx); len(as) != 0 {
		t.Fatalf("refused anchors kept: %d", len(as))
	}
	if _, err := b.AcceptAnchor(ctx, good); err != nil {
		t.Fatal(err)
	}
	as, _ := b.Anchors(ctx)
	if len(as) != 1 {
		t.Fatalf("%d anchors", len(as))
	}
	if _, err := witnessing.ParseStoreHeadAnchor(as[0]); err != nil {
		t.Fatalf("served anchor does not verify: %v", err)
	}
}

// TestHeadsAcrossRestart: on a durable store, the heads (v1, v2, the
// signed log head) at a sequence are the same after a restart, an old
// head is still witnessable, and the file sidecar keeps its statements.
func TestHeadsAcrossRestart(t *testing.T) {
	for name, open := range map[string]func(dir string) (evidence.Store, error){
		"logstore": func(dir string) (evidence.Store, error) { return logstore.Open(dir, nil) },
		"sqlite":   func(dir string) (evidence.Store, error) { return sqlite.Open(dir, nil) },
	} {
		t.Run(name, func(t *testing.T) { testHeadsAcrossRestart(t, open) })
	}
}

func testHeadsAcrossRestart(t *testing.T, open func(string) (evidence.Store, error)) {
	ctx := context.Background()
	dir := t.TempDir()
	_, key, _ := ed25519.GenerateKey(nil)
	start := func() (*Boundary, evidence.Store) {
		st, err := open(filepath.Join(dir, "ev"))
		if err != nil {
			t.Fatal(err)
		}
		b := signedFixture(t, st, key)
		ws, err := evlog.OpenFileWitnessStore(filepath.Join(dir, "wit"))
		if err != nil {
			t.Fatal(err)
		}
		b.SetWitnessStore(ws)
		return b, st
	}
	b, st := start()
	for i := range 5 {
		echo(t, b, fmt.Sprintf("c%d", i%3))
	}
	v1, v2 := head(t, b, ""), head(t, b, witnessing.StoreHeadV2)
	lh, err := b.LogHead(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcceptWitness(ctx, witness(t, "test-host", v1.Sequence, v1.StoreHead, "")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	b, st = start()
	defer st.Close()
	echo(t, b, "c9")
	if h, err := b.HeadAt(ctx, "", v1.Sequence); err != nil || h.StoreHead != v1.StoreHead {
		t.Fatalf("v1 after restart: %v %+v vs %+v", err, h, v1)
	}
	if h, err := b.HeadAt(ctx, witnessing.StoreHeadV2, v2.Sequence); err != nil || h.StoreHead != v2.StoreHead {
		t.Fatalf("v2 after restart: %v", err)
	}
	lh2, err := b.LogHead(ctx, lh.TreeSize)
	if err != nil || lh2.RootHash != lh.RootHash {
		t.Fatalf("log head after restart: %v", err)
	}
	cons, err := b.LogConsistency(ctx, lh.TreeSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := identity.ParsePublicKey(key.Public().(ed25519.PublicKey))
	if err := merkle.VerifyConsistency(pub, lh, cons.Second, cons.Proof); err != nil {
		t.Fatalf("the pre-restart head is not a prefix of the new one: %v", err)
	}
	if _, err := b.AcceptWitness(ctx, witness(t, "test-host", v1.Sequence, v1.StoreHead, "")); err != nil {
		t.Fatalf("old head after restart: %v", err)
	}
	if ws, _ := b.Witnesses(ctx); len(ws) != 2 {
		t.Fatalf("sidecar kept %d statements across the restart, want 2", len(ws))
	}
}

// TestLogProofs: every event's inclusion proof verifies offline against a
// signed head with the event's stored bytes as leaf data, a changed byte
// does not, and every pair of heads is consistent.
func TestLogProofs(t *testing.T) {
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	pub, _ := identity.ParsePublicKey(key.Public().(ed25519.PublicKey))
	b := signedFixture(t, evidence.NewMemory(), key)
	for i := range 4 {
		echo(t, b, fmt.Sprintf("c%d", i))
	}
	n := b.store.LastSequence()
	for seq := uint64(1); seq <= n; seq++ {
		p, err := b.LogInclusion(ctx, seq, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := merkle.VerifyInclusion(pub, p.Head, merkle.LeafHash(p.Event), p.Proof); err != nil {
			t.Fatalf("sequence %d: %v", seq, err)
		}
		bad := append([]byte(nil), p.Event...)
		bad[len(bad)/2] ^= 1
		if merkle.VerifyInclusion(pub, p.Head, merkle.LeafHash(bad), p.Proof) == nil {
			t.Fatalf("sequence %d: a changed event verified", seq)
		}
		for m := uint64(0); m <= seq; m++ {
			c, err := b.LogConsistency(ctx, m, seq)
			if err != nil {
				t.Fatal(err)
			}
			if err := merkle.VerifyConsistency(pub, c.First, c.Second, c.Proof); err != nil {
				t.Fatalf("(%d,%d): %v", m, seq, err)
			}
		}
	}
	if _, err := b.LogInclusion(ctx, n+1, 0); !errors.Is(err, evlog.ErrBadSequence) {
		t.Fatalf("past the log: %v", err)
	}
	if _, err := fixtureBoundary(t, evidence.NewMemory()).LogHead(ctx, 0); !errors.Is(err, evlog.ErrUnsigned) {
		t.Fatalf("unsigned host: %v", err)
	}
}

// TestWitnessedRevocationHead: by default the witnessed revocation_head is
// the digest of the mandate revocations the host holds; once it holds one,
// a witness still countersigning the empty set is refused.
func TestWitnessedRevocationHead(t *testing.T) {
	ctx := context.Background()
	b := fixtureBoundary(t, evidence.NewMemory())
	side := new(evlog.MemoryWitnessStore)
	b.SetWitnessStore(side)
	echo(t, b, "c1")
	before := head(t, b, "")
	raw, err := os.ReadFile(specdata.Path("chp/vectors/mandate-revocation.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcceptRevocation(raw, true); err != nil {
		t.Fatal(err)
	}
	after := head(t, b, "")
	if before.RevocationHead != witnessing.EmptyRevocationHead || after.RevocationHead != b.RevocationHead() || after.RevocationHead == before.RevocationHead {
		t.Fatalf("revocation heads: before %s, after %s, held %s", before.RevocationHead, after.RevocationHead, b.RevocationHead())
	}
	if _, err := b.AcceptWitness(ctx, witness(t, "test-host", after.Sequence, after.StoreHead, witnessing.EmptyRevocationHead)); !errors.Is(err, evlog.ErrRevocationHeadMismatch) {
		t.Fatalf("a witness of the dropped set: %v", err)
	}
	if _, err := b.AcceptWitness(ctx, witness(t, "test-host", after.Sequence, after.StoreHead, after.RevocationHead)); err != nil {
		t.Fatal(err)
	}
	rs, _ := side.Receipts(ctx)
	if len(rs) != 1 || rs[0].RevocationCount == nil || *rs[0].RevocationCount != 1 {
		t.Fatalf("the receipt does not snapshot the held set: %+v", rs)
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
