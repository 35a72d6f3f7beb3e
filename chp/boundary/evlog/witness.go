package evlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/capmesh/capmesh/chp/witnessing"
)

// Witness refusals (chp-v0.2.md §12). A statement that does not verify on
// its own wraps witnessing.ErrInvalidWitness (400 invalid_witness).
var (
	// ErrHeadMismatch: the statement's store_head is not the host's own
	// head at the witnessed sequence under either scheme (409).
	ErrHeadMismatch = errors.New("evlog: head_mismatch: the store head at that sequence differs")
	// ErrRevocationHeadMismatch: the statement's revocation_head is not
	// the host's current one (409).
	ErrRevocationHeadMismatch = errors.New("evlog: revocation_head_mismatch: the host holds another revocation set")
	// ErrWitnessStoreFull: the sidecar holds MaxSidecarEntries statements
	// of the kind and the statement's issuer none to supersede (507
	// sidecar_full, -32046). Nothing is kept.
	ErrWitnessStoreFull = errors.New("evlog: sidecar_full: the witness sidecar holds as many statements as it keeps")
)

// Receipt is a received chain-witness statement as the witnessed host
// keeps it: compact, whatever the size of the log. Beside the statement it
// holds what lets a verifier recompute what the witness signed without a
// snapshot of the leaves: the store-head scheme the statement matched, and
// the size and RFC 9162 root of the Merkle event log at the witnessed
// sequence — the events ≤ sequence, whose stored bytes carry every
// correlation's head, and a consistency proof (GET /log/consistency) from
// that size shows they are still the ones served. When the statement
// countersigned a revocation head, RevocationCount is the number of
// revocations held then: the held set only grows, in arrival order, so the
// snapshot is the first RevocationCount statements of GET /revocations
// (docs/witnessing.md).
type Receipt struct {
	Statement       json.RawMessage `json:"statement"`
	Scheme          string          `json:"scheme,omitempty"`
	LogSize         uint64          `json:"log_size"`
	LogRoot         string          `json:"log_root,omitempty"`
	RevocationCount *int            `json:"revocation_count,omitempty"`
}

// WitnessStore is the sidecar of received witness statements and anchors.
// It is never the evidence store: a witness event would draw a sequence
// and move the head being witnessed. An implementation keeps identical
// statements once (adding one again succeeds and keeps nothing), holds at
// most MaxPerIssuer per issuer — a later statement superseding the
// issuer's oldest — and MaxSidecarEntries in all (ErrIssuerQuota,
// ErrWitnessStoreFull).
type WitnessStore interface {
	AddReceipt(ctx context.Context, r Receipt) error
	Receipts(ctx context.Context) ([]Receipt, error)
	AddAnchor(ctx context.Context, statement json.RawMessage) error
	Anchors(ctx context.Context) ([]json.RawMessage, error)
}

// MemoryWitnessStore is the default WitnessStore: lost at exit. The zero
// value is ready to use.
type MemoryWitnessStore struct {
	mu       sync.Mutex
	receipts shelf
	anchors  shelf
}

// AddReceipt implements WitnessStore.
func (m *MemoryWitnessStore) AddReceipt(_ context.Context, r Receipt) error {
	e, err := receiptEntry(r)
	if err != nil {
		return err
	}
	return m.add(&m.receipts, e, nil)
}

// add places e on sh and, unless it is a duplicate, persists it (persist:
// nil for memory) and keeps it, all under m.mu.
func (m *MemoryWitnessStore) add(sh *shelf, e entry, persist func(e entry, victim *entry) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dup, victim, err := sh.place(e)
	if err != nil || dup {
		return err
	}
	if persist != nil {
		var v *entry
		if victim >= 0 {
			v = &sh.entries[victim]
		}
		if err := persist(e, v); err != nil {
			return err
		}
	}
	sh.apply(e, victim)
	return nil
}

// Receipts implements WitnessStore.
func (m *MemoryWitnessStore) Receipts(context.Context) ([]Receipt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Receipt, 0, len(m.receipts.entries))
	for _, e := range m.receipts.entries {
		var r Receipt
		if err := json.Unmarshal(e.line, &r); err != nil {
			return nil, fmt.Errorf("evlog: witness sidecar: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// AddAnchor implements WitnessStore.
func (m *MemoryWitnessStore) AddAnchor(_ context.Context, s json.RawMessage) error {
	e, err := anchorEntry(s)
	if err != nil {
		return err
	}
	return m.add(&m.anchors, e, nil)
}

// Anchors implements WitnessStore.
func (m *MemoryWitnessStore) Anchors(context.Context) ([]json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]json.RawMessage, len(m.anchors.entries))
	for i, e := range m.anchors.entries {
		out[i] = bytes.Clone(e.line)
	}
	return out, nil
}

// FileWitnessStore keeps receipts and anchors as JSON lines in
// witnesses.jsonl and anchors.jsonl under a directory, each line synced
// before the statement is acknowledged. A superseded statement is struck
// by a line {"superseded": digest} written with its successor; once struck
// lines outnumber kept ones the file is rewritten, so it stays within
// about twice the bound.
type FileWitnessStore struct {
	dir  string
	mem  MemoryWitnessStore
	dead map[string]int // struck lines per file, for compaction
}

const (
	receiptsFile = "witnesses.jsonl"
	anchorsFile  = "anchors.jsonl"
)

// OpenFileWitnessStore opens (creating) the sidecar in dir and loads what
// it holds. A torn last line (a crash mid-write) is ignored.
func OpenFileWitnessStore(dir string) (*FileWitnessStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("evlog: witness sidecar: %w", err)
	}
	s := &FileWitnessStore{dir: dir, dead: make(map[string]int)}
	for _, f := range []struct {
		name string
		sh   *shelf
		mk   func([]byte) (entry, error)
	}{
		{receiptsFile, &s.mem.receipts, func(b []byte) (entry, error) {
			var r Receipt
			if err := json.Unmarshal(b, &r); err != nil {
				return entry{}, err
			}
			return receiptEntry(r)
		}},
		{anchorsFile, &s.mem.anchors, func(b []byte) (entry, error) { return anchorEntry(bytes.Clone(b)) }},
	} {
		if err := s.load(f.name, f.sh, f.mk); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// load replays one file onto sh: kept lines, and the strikes of
// superseded ones.
func (s *FileWitnessStore) load(name string, sh *shelf, mk func([]byte) (entry, error)) error {
	lines := 0
	err := readLines(filepath.Join(s.dir, name), func(b []byte) error {
		lines++
		var strike struct {
			Superseded string `json:"superseded"`
		}
		if json.Unmarshal(b, &strike) == nil && strike.Superseded != "" {
			var d [32]byte
			if n, err := hex.Decode(d[:], []byte(strike.Superseded)); err != nil || n != len(d) {
				return fmt.Errorf("bad superseded digest %q", strike.Superseded)
			}
			sh.drop(d)
			return nil
		}
		e, err := mk(b)
		if err != nil {
			return err
		}
		if dup, victim, err := sh.place(e); err == nil && !dup {
			sh.apply(e, victim) // a crash between strike and line
		}
		return nil
	})
	s.dead[name] = lines - len(sh.entries)
	return err
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

// persist appends e's line to the file name — after the strike of victim,
// in the same synced write — and rewrites the file once struck lines
// outnumber kept ones (under the store's lock).
func (s *FileWitnessStore) persist(name string, sh *shelf) func(e entry, victim *entry) error {
	return func(e entry, victim *entry) error {
		var buf []byte
		if victim != nil {
			buf = fmt.Appendf(buf, "{\"superseded\":%q}\n", hex.EncodeToString(victim.digest[:]))
			s.dead[name] += 2
		}
		buf = append(append(buf, e.line...), '\n')
		if err := appendFile(filepath.Join(s.dir, name), buf); err != nil {
			return fmt.Errorf("evlog: witness sidecar: %w", err)
		}
		if s.dead[name] > len(sh.entries)+MaxPerIssuer {
			// The line just written is kept by the caller; compact what is
			// kept now plus it, minus the victim.
			var out []byte
			for i := range sh.entries {
				if victim != nil && sh.entries[i].digest == victim.digest {
					continue
				}
				out = append(append(out, sh.entries[i].line...), '\n')
			}
			out = append(append(out, e.line...), '\n')
			// The statement is durable already: a failed rewrite leaves
			// the file as it was, to be compacted on a later post.
			if rewriteFile(filepath.Join(s.dir, name), out) == nil {
				s.dead[name] = 0
			}
		}
		return nil
	}
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// rewriteFile replaces path with b atomically: a synced temporary file
// renamed over it, then the directory synced.
func rewriteFile(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// AddReceipt implements WitnessStore.
func (s *FileWitnessStore) AddReceipt(_ context.Context, r Receipt) error {
	e, err := receiptEntry(r)
	if err != nil {
		return err
	}
	return s.mem.add(&s.mem.receipts, e, s.persist(receiptsFile, &s.mem.receipts))
}

// Receipts implements WitnessStore.
func (s *FileWitnessStore) Receipts(ctx context.Context) ([]Receipt, error) {
	return s.mem.Receipts(ctx)
}

// AddAnchor implements WitnessStore.
func (s *FileWitnessStore) AddAnchor(_ context.Context, a json.RawMessage) error {
	e, err := anchorEntry(a)
	if err != nil {
		return err
	}
	return s.mem.add(&s.mem.anchors, e, s.persist(anchorsFile, &s.mem.anchors))
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
// scheme ("" = either scheme), and returns a receipt naming the scheme
// matched and the event log's size and root at seq.
func (g *Log) matchHead(ctx context.Context, seq uint64, storeHead, scheme string) (Receipt, error) {
	l, err := g.syncLog(ctx)
	if err != nil {
		return Receipt{}, err
	}
	defer l.mu.Unlock()
	if seq > l.last() {
		return Receipt{}, fmt.Errorf("%w: sequence %d is past the store's %d", ErrHeadMismatch, seq, l.last())
	}
	leaves := l.leavesAt(seq)
	for _, s := range []string{witnessing.StoreHeadV1, witnessing.StoreHeadV2} {
		if scheme != "" && s != scheme {
			continue
		}
		if root, _ := witnessing.StoreHeadRoot(s, leaves); root == storeHead {
			size := l.sizeAt(seq)
			logRoot, err := l.tree.RootAt(size)
			if err != nil {
				return Receipt{}, err
			}
			return Receipt{Scheme: s, LogSize: size, LogRoot: logRoot.String()}, nil
		}
	}
	return Receipt{}, fmt.Errorf("%w (sequence %d)", ErrHeadMismatch, seq)
}

// compactStatement is raw without insignificant white space, refused past
// MaxStatementBytes: the bytes a sidecar keeps and identifies a statement
// by.
func compactStatement(raw []byte) ([]byte, error) {
	if len(raw) > MaxStatementBytes {
		return nil, fmt.Errorf("%w: the statement is %d bytes, over the %d the host keeps", witnessing.ErrInvalidWitness, len(raw), MaxStatementBytes)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, fmt.Errorf("%w: %w", witnessing.ErrInvalidWitness, err)
	}
	return b.Bytes(), nil
}

// AcceptWitness verifies a chain-witness statement over this host's head
// and keeps it (POST /witness): the statement must fit MaxStatementBytes,
// verify on its own and name this host (witnessing.ErrInvalidWitness), its
// store_head must be the host's own head recomputed at the witnessed
// sequence under v1 or v2 (ErrHeadMismatch), and its revocation_head, when
// present, the host's current one (ErrRevocationHeadMismatch). The sidecar
// then keeps it once, within its witness's quota (ErrIssuerQuota,
// ErrWitnessStoreFull), as a compact Receipt. Nothing is kept on any
// refusal; the same statement again is accepted and kept once.
func (g *Log) AcceptWitness(ctx context.Context, raw []byte) (*witnessing.ChainWitness, error) {
	stmt, err := compactStatement(raw)
	if err != nil {
		return nil, err
	}
	w, err := witnessing.ParseChainWitness(stmt)
	if err != nil {
		return nil, err
	}
	if w.HostID != g.cfg.HostID {
		return nil, fmt.Errorf("%w: the statement witnesses %q, not this host", witnessing.ErrInvalidWitness, w.HostID)
	}
	r, err := g.matchHead(ctx, w.Sequence, w.StoreHead, "")
	if err != nil {
		return nil, err
	}
	r.Statement = stmt
	if w.RevocationHead != "" {
		ids, rev, err := g.revocations(ctx)
		if err != nil {
			return nil, err
		}
		if rev != w.RevocationHead {
			return nil, ErrRevocationHeadMismatch
		}
		n := len(ids)
		r.RevocationCount = &n
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
// sequence, then keeps it once, within its did:key's quota (POST /anchors;
// the bounds of AcceptWitness).
func (g *Log) AcceptAnchor(ctx context.Context, raw []byte) (*witnessing.StoreHeadAnchor, error) {
	stmt, err := compactStatement(raw)
	if err != nil {
		return nil, err
	}
	a, err := witnessing.ParseStoreHeadAnchor(stmt)
	if err != nil {
		return nil, err
	}
	if a.HostID != g.cfg.HostID {
		return nil, fmt.Errorf("%w: the anchor is for %q, not this host", witnessing.ErrInvalidWitness, a.HostID)
	}
	if _, err := g.matchHead(ctx, a.Sequence, a.StoreHead, a.StoreHeadScheme); err != nil {
		return nil, err
	}
	if err := g.sidecar().AddAnchor(ctx, stmt); err != nil {
		return nil, err
	}
	return a, nil
}

// Anchors returns the kept store-head anchors, oldest first (GET /anchors).
func (g *Log) Anchors(ctx context.Context) ([]json.RawMessage, error) {
	return g.sidecar().Anchors(ctx)
}
