package evlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/capmesh/capmesh/chp"
)

// Witness refusals (chp-v0.2.md §12). A statement that does not verify on
// its own wraps chp.ErrInvalidWitness (400 invalid_witness).
var (
	// ErrHeadMismatch: the statement's store_head is not the host's own
	// head at the witnessed sequence under either scheme (409).
	ErrHeadMismatch = errors.New("evlog: head_mismatch: the store head at that sequence differs")
	// ErrRevocationHeadMismatch: the statement's revocation_head is not
	// the host's current one (409).
	ErrRevocationHeadMismatch = errors.New("evlog: revocation_head_mismatch: the host holds another revocation set")
	// ErrWitnessStoreFull: the sidecar refuses further statements (503).
	ErrWitnessStoreFull = errors.New("evlog: the witness sidecar is full")
)

// Receipt is a received chain-witness statement as the witnessed host
// keeps it: the statement's bytes, the leaves it countersigned (every
// correlation's head at the sequence) and, when it countersigned a
// revocation head, the revocation identifiers held.
type Receipt struct {
	Statement   json.RawMessage   `json:"statement"`
	Leaves      map[string]string `json:"leaves"`
	Revocations []string          `json:"revocations,omitempty"`
}

// WitnessStore is the sidecar of received witness statements and anchors.
// It is never the evidence store: a witness event would draw a sequence
// and move the head being witnessed.
type WitnessStore interface {
	AddReceipt(ctx context.Context, r Receipt) error
	Receipts(ctx context.Context) ([]Receipt, error)
	AddAnchor(ctx context.Context, statement json.RawMessage) error
	Anchors(ctx context.Context) ([]json.RawMessage, error)
}

// MaxSidecarEntries bounds the statements (and anchors) a sidecar keeps.
const MaxSidecarEntries = 10000

// MemoryWitnessStore is the default WitnessStore: lost at exit. The zero
// value is ready to use.
type MemoryWitnessStore struct {
	mu       sync.Mutex
	receipts []Receipt
	anchors  []json.RawMessage
}

// AddReceipt implements WitnessStore.
func (m *MemoryWitnessStore) AddReceipt(_ context.Context, r Receipt) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.receipts) >= MaxSidecarEntries {
		return ErrWitnessStoreFull
	}
	m.receipts = append(m.receipts, r)
	return nil
}

// Receipts implements WitnessStore.
func (m *MemoryWitnessStore) Receipts(context.Context) ([]Receipt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Receipt(nil), m.receipts...), nil
}

// AddAnchor implements WitnessStore.
func (m *MemoryWitnessStore) AddAnchor(_ context.Context, s json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.anchors) >= MaxSidecarEntries {
		return ErrWitnessStoreFull
	}
	m.anchors = append(m.anchors, s)
	return nil
}

// Anchors implements WitnessStore.
func (m *MemoryWitnessStore) Anchors(context.Context) ([]json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]json.RawMessage(nil), m.anchors...), nil
}

// FileWitnessStore keeps receipts and anchors as JSON lines in
// witnesses.jsonl and anchors.jsonl under a directory, each line synced
// before the statement is acknowledged.
type FileWitnessStore struct {
	dir string
	mem MemoryWitnessStore
}

// OpenFileWitnessStore opens (creating) the sidecar in dir and loads what
// it holds. A torn last line (a crash mid-write) is ignored.
func OpenFileWitnessStore(dir string) (*FileWitnessStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("evlog: witness sidecar: %w", err)
	}
	s := &FileWitnessStore{dir: dir}
	if err := readLines(filepath.Join(dir, "witnesses.jsonl"), func(b []byte) error {
		var r Receipt
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		s.mem.receipts = append(s.mem.receipts, r)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := readLines(filepath.Join(dir, "anchors.jsonl"), func(b []byte) error {
		s.mem.anchors = append(s.mem.anchors, json.RawMessage(bytes.Clone(b)))
		return nil
	}); err != nil {
		return nil, err
	}
	return s, nil
}

func readLines(path string, fn func([]byte) error) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("evlog: witness sidecar: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			if !bytes.HasSuffix(data, []byte("\n")) && bytes.HasSuffix(data, sc.Bytes()) {
				return nil // a torn last line
			}
			return fmt.Errorf("evlog: witness sidecar %s: %w", path, err)
		}
	}
	return sc.Err()
}

func (s *FileWitnessStore) appendLine(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("evlog: witness sidecar: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// AddReceipt implements WitnessStore.
func (s *FileWitnessStore) AddReceipt(ctx context.Context, r Receipt) error {
	s.mem.mu.Lock()
	full := len(s.mem.receipts) >= MaxSidecarEntries
	s.mem.mu.Unlock()
	if full {
		return ErrWitnessStoreFull
	}
	if err := s.appendLine("witnesses.jsonl", r); err != nil {
		return err
	}
	return s.mem.AddReceipt(ctx, r)
}

// Receipts implements WitnessStore.
func (s *FileWitnessStore) Receipts(ctx context.Context) ([]Receipt, error) {
	return s.mem.Receipts(ctx)
}

// AddAnchor implements WitnessStore.
func (s *FileWitnessStore) AddAnchor(ctx context.Context, a json.RawMessage) error {
	s.mem.mu.Lock()
	full := len(s.mem.anchors) >= MaxSidecarEntries
	s.mem.mu.Unlock()
	if full {
		return ErrWitnessStoreFull
	}
	if err := s.appendLine("anchors.jsonl", a); err != nil {
		return err
	}
	return s.mem.AddAnchor(ctx, a)
}

// Anchors implements WitnessStore.
func (s *FileWitnessStore) Anchors(ctx context.Context) ([]json.RawMessage, error) {
	return s.mem.Anchors(ctx)
}

// SetWitnessStore installs the sidecar for received statements (default:
// in memory).
func (g *Log) SetWitnessStore(ws WitnessStore) {
	g.mu.Lock()
	g.side = ws
	g.mu.Unlock()
}

func (g *Log) sidecar() WitnessStore {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.side == nil {
		g.side = &MemoryWitnessStore{}
	}
	return g.side
}

// matchHead reports whether storeHead is the host's own head at seq under
// scheme ("" = either scheme), and returns the leaves at seq.
func (g *Log) matchHead(ctx context.Context, seq uint64, storeHead, scheme string) (map[string]string, error) {
	l, err := g.syncLog(ctx)
	if err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	if seq > l.last() {
		return nil, fmt.Errorf("%w: sequence %d is past the store's %d", ErrHeadMismatch, seq, l.last())
	}
	leaves := l.leavesAt(seq)
	for _, s := range []string{chp.StoreHeadV1, chp.StoreHeadV2} {
		if scheme != "" && s != scheme {
			continue
		}
		if root, _ := chp.StoreHeadRoot(s, leaves); root == storeHead {
			return leaves, nil
		}
	}
	return nil, fmt.Errorf("%w (sequence %d)", ErrHeadMismatch, seq)
}

// AcceptWitness verifies a chain-witness statement over this host's head
// and keeps it (POST /witness): the statement must verify on its own and
// name this host (chp.ErrInvalidWitness), its store_head must be the
// host's own head recomputed at the witnessed sequence under v1 or v2
// (ErrHeadMismatch), and its revocation_head, when present, the host's
// current one (ErrRevocationHeadMismatch). The leaves and the revocation
// set are kept beside it. Nothing is kept on any refusal.
func (g *Log) AcceptWitness(ctx context.Context, raw []byte) (*chp.ChainWitness, error) {
	w, err := chp.ParseChainWitness(raw)
	if err != nil {
		return nil, err
	}
	if w.HostID != g.cfg.HostID {
		return nil, fmt.Errorf("%w: the statement witnesses %q, not this host", chp.ErrInvalidWitness, w.HostID)
	}
	leaves, err := g.matchHead(ctx, w.Sequence, w.StoreHead, "")
	if err != nil {
		return nil, err
	}
	r := Receipt{Statement: bytes.Clone(raw), Leaves: leaves}
	if w.RevocationHead != "" {
		ids, rev, err := g.revocations(ctx)
		if err != nil {
			return nil, err
		}
		if rev != w.RevocationHead {
			return nil, ErrRevocationHeadMismatch
		}
		r.Revocations = append([]string{}, ids...)
	}
	if err := g.sidecar().AddReceipt(ctx, r); err != nil {
		return nil, err
	}
	return w, nil
}

// Witnesses returns the received statements, oldest first (GET
// /witnesses).
func (g *Log) Witnesses(ctx context.Context) ([]json.RawMessage, error) {
	rs, err := g.sidecar().Receipts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(rs))
	for i, r := range rs {
		out[i] = r.Statement
	}
	return out, nil
}

// AcceptAnchor verifies a store-head anchor offline (its did:key SSHSIG
// countersignature) and that it anchors this host's own head at its
// sequence, then keeps it (POST /anchors).
func (g *Log) AcceptAnchor(ctx context.Context, raw []byte) (*chp.StoreHeadAnchor, error) {
	a, err := chp.ParseStoreHeadAnchor(raw)
	if err != nil {
		return nil, err
	}
	if a.HostID != g.cfg.HostID {
		return nil, fmt.Errorf("%w: the anchor is for %q, not this host", chp.ErrInvalidWitness, a.HostID)
	}
	if _, err := g.matchHead(ctx, a.Sequence, a.StoreHead, a.StoreHeadScheme); err != nil {
		return nil, err
	}
	if err := g.sidecar().AddAnchor(ctx, bytes.Clone(raw)); err != nil {
		return nil, err
	}
	return a, nil
}

// Anchors returns the kept store-head anchors, oldest first (GET /anchors).
func (g *Log) Anchors(ctx context.Context) ([]json.RawMessage, error) {
	return g.sidecar().Anchors(ctx)
}
