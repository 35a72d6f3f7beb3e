package evlog

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/merkle"
)

// ErrNoHead is returned when the host cannot compute a store head: its
// evidence store cannot replay its whole log (evidence.Scanner).
var ErrNoHead = errors.New("evlog: the evidence store cannot replay its log; no store head")

// ErrUnsigned is returned for a signed tree head on a host without a key.
var ErrUnsigned = errors.New("evlog: the host has no key; its log heads cannot be signed")

// ErrBadSequence is returned for a sequence or tree size the log has not
// reached, or a pair out of order.
var ErrBadSequence = errors.New("evlog: sequence out of range")

// RevocationSource is the hook through which the log learns the
// revocations the host holds (chp-v0.2.md §12 Revocation freshness): the
// chp-revocation-head-v1 identifiers, "m\x00{mandate_id}\x00{principal
// key}" or "k\x00{key_id}". Without one the log uses
// Config.HeldRevocations; with none held the head is
// chp.EmptyRevocationHead.
type RevocationSource interface {
	RevocationIDs(ctx context.Context) ([]string, error)
}

// errScanDone stops a scan at the last durable record.
var errScanDone = errors.New("scan done")

// headLog mirrors the evidence store's global sequence for the witnessed
// heads and the Merkle event log. It catches up with the store lazily
// (sync), so sealing an event costs nothing extra; leaf i is the i-th
// record in sequence order, its data the record's stored bytes.
type headLog struct {
	mu     sync.Mutex
	seqs   []uint64
	corrs  []string
	hashes []string
	cur    map[string]string // every correlation's head at the last sequence
	tree   merkle.Tree
}

// syncLog folds every record the store holds past the mirror into it and
// returns the mirror locked; the caller unlocks.
func (g *Log) syncLog(ctx context.Context) (*headLog, error) {
	sc, ok := g.cfg.Store.(evidence.Scanner)
	if !ok {
		return nil, ErrNoHead
	}
	l := &g.log
	l.mu.Lock()
	after := l.last()
	if l.cur == nil {
		l.cur = make(map[string]string)
	}
	upTo := g.cfg.Store.LastSequence()
	if upTo <= after {
		return l, nil // nothing new: no scan
	}
	// Only durable records enter a head: a head a peer countersigns must
	// still be recomputable after a crash.
	if err := g.cfg.Store.Sync(ctx, upTo); err != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("evlog: syncing the evidence log: %w", err)
	}
	err := sc.Scan(ctx, after, func(r evidence.Record) error {
		if r.Sequence > upTo {
			return errScanDone
		}
		if r.Sequence <= l.last() {
			return fmt.Errorf("the store replayed sequence %d after %d", r.Sequence, l.last())
		}
		l.cur[r.CorrelationID] = r.ContentHash
		l.seqs = append(l.seqs, r.Sequence)
		l.corrs = append(l.corrs, r.CorrelationID)
		l.hashes = append(l.hashes, r.ContentHash)
		l.tree.Append(merkle.LeafHash(r.Data))
		return nil
	})
	if err != nil && !errors.Is(err, errScanDone) {
		l.mu.Unlock()
		return nil, fmt.Errorf("evlog: replaying the evidence log: %w", err)
	}
	return l, nil
}

// last is the sequence of the newest mirrored record (0: none).
func (l *headLog) last() uint64 {
	if len(l.seqs) == 0 {
		return 0
	}
	return l.seqs[len(l.seqs)-1]
}

// sizeAt is the number of records with sequence ≤ seq: the tree size of
// the log as of seq.
func (l *headLog) sizeAt(seq uint64) uint64 {
	return uint64(sort.Search(len(l.seqs), func(i int) bool { return l.seqs[i] > seq }))
}

// leavesAt is every correlation's head content hash as of sequence seq,
// in a map the caller owns.
func (l *headLog) leavesAt(seq uint64) map[string]string {
	if seq >= l.last() {
		return maps.Clone(l.cur)
	}
	n := l.sizeAt(seq)
	m := make(map[string]string)
	for i := uint64(0); i < n; i++ {
		m[l.corrs[i]] = l.hashes[i]
	}
	return m
}

func checkScheme(scheme string) (string, error) {
	switch scheme {
	case "":
		return chp.StoreHeadV1, nil
	case chp.StoreHeadV1, chp.StoreHeadV2:
		return scheme, nil
	}
	return "", fmt.Errorf("%w: %w %q", ErrBadQuery, chp.ErrUnknownScheme, scheme)
}

// revocations returns the held revocation identifiers and their head.
func (g *Log) revocations(ctx context.Context) ([]string, string, error) {
	g.mu.Lock()
	src := g.rev
	g.mu.Unlock()
	if src == nil {
		var ids []string
		if g.cfg.HeldRevocations != nil {
			ids = g.cfg.HeldRevocations() // the mandate revocations this host holds
		}
		return ids, chp.RevocationHead(ids), nil
	}
	ids, err := src.RevocationIDs(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("evlog: revocation head: %w", err)
	}
	return ids, chp.RevocationHead(ids), nil
}

// Head returns the store head now (GET /head) under scheme ("" =
// chp-store-head-v1), with the revocation head.
func (g *Log) Head(ctx context.Context, scheme string) (*chp.StoreHead, error) {
	return g.headAt(ctx, scheme, nil)
}

// HeadAt returns the store head as of sequence seq, which the store must
// have reached.
func (g *Log) HeadAt(ctx context.Context, scheme string, seq uint64) (*chp.StoreHead, error) {
	return g.headAt(ctx, scheme, &seq)
}

func (g *Log) headAt(ctx context.Context, scheme string, at *uint64) (*chp.StoreHead, error) {
	scheme, err := checkScheme(scheme)
	if err != nil {
		return nil, err
	}
	_, rev, err := g.revocations(ctx)
	if err != nil {
		return nil, err
	}
	l, err := g.syncLog(ctx)
	if err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	seq := l.last()
	if at != nil {
		if *at > seq {
			return nil, fmt.Errorf("%w: sequence %d is past the log's %d", ErrBadSequence, *at, seq)
		}
		seq = *at
	}
	root, err := chp.StoreHeadRoot(scheme, l.leavesAt(seq))
	if err != nil {
		return nil, err
	}
	return &chp.StoreHead{HostID: g.cfg.HostID, Scheme: scheme, Sequence: seq, StoreHead: root,
		RevocationHead: rev, At: chp.FormatTime(g.cfg.Now())}, nil
}

// HeadInclusion proves correlationID's current head under the current
// chp-store-head-v2 root (GET /head/inclusion/{id}).
func (g *Log) HeadInclusion(ctx context.Context, correlationID string) (*chp.StoreHead, *chp.StoreHeadInclusion, error) {
	l, err := g.syncLog(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer l.mu.Unlock()
	seq := l.last()
	leaves := l.leavesAt(seq)
	p, ok := chp.NewStoreHeadInclusion(leaves, correlationID)
	if !ok {
		return nil, nil, ErrUnknownCorrelation
	}
	root, _ := chp.StoreHeadRoot(chp.StoreHeadV2, leaves)
	return &chp.StoreHead{HostID: g.cfg.HostID, Scheme: chp.StoreHeadV2, Sequence: seq, StoreHead: root,
		At: chp.FormatTime(g.cfg.Now())}, &p, nil
}

// HeadConsistency is the chp-store-head-v2 consistency proof between the
// heads at sequences first ≤ second (GET /head/consistency), built as
// proposal 0022 specifies. It is honest, yet fails to verify whenever the
// store changed a leaf other than by appending in sort order — the v2 flaw
// (docs/witnessing.md); LogConsistency is the sound proof.
func (g *Log) HeadConsistency(ctx context.Context, first, second uint64) (*chp.StoreHeadConsistency, error) {
	l, err := g.syncLog(ctx)
	if err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	if first > second || second > l.last() {
		return nil, fmt.Errorf("%w: want first ≤ second ≤ %d", ErrBadSequence, l.last())
	}
	p := chp.NewStoreHeadConsistency(l.leavesAt(first), l.leavesAt(second))
	return &p, nil
}

// hostSigner adapts the host key to merkle.Signer.
type hostSigner struct {
	key ed25519.PrivateKey
	pub identity.PublicKey
}

func (s hostSigner) Public() identity.PublicKey { return s.pub }
func (s hostSigner) Sign(msg []byte) []byte     { return ed25519.Sign(s.key, msg) }

func (g *Log) signer() (hostSigner, error) {
	if g.cfg.Key == nil {
		return hostSigner{}, ErrUnsigned
	}
	pub, err := identity.ParsePublicKey(g.cfg.Key.Public().(ed25519.PublicKey))
	if err != nil {
		return hostSigner{}, fmt.Errorf("evlog: host key: %w", err)
	}
	return hostSigner{key: g.cfg.Key, pub: pub}, nil
}

// LogHead signs the head of the Merkle event log at treeSize leaves (0:
// the current size). Leaf i is the i-th event of the global sequence.
func (g *Log) LogHead(ctx context.Context, treeSize uint64) (merkle.SignedTreeHead, error) {
	s, err := g.signer()
	if err != nil {
		return merkle.SignedTreeHead{}, err
	}
	l, err := g.syncLog(ctx)
	if err != nil {
		return merkle.SignedTreeHead{}, err
	}
	defer l.mu.Unlock()
	return g.logHeadLocked(l, s, treeSize)
}

func (g *Log) logHeadLocked(l *headLog, s hostSigner, size uint64) (merkle.SignedTreeHead, error) {
	if size == 0 {
		size = l.tree.Size()
	}
	if size > l.tree.Size() {
		return merkle.SignedTreeHead{}, fmt.Errorf("%w: tree size %d is past the log's %d", ErrBadSequence, size, l.tree.Size())
	}
	return l.tree.SignHead(s, size, g.cfg.Now())
}

// LogInclusion is an event's inclusion in the Merkle event log: the
// event's stored bytes (the leaf data), a signed head and the proof.
type LogInclusion struct {
	Sequence uint64                `json:"sequence"`
	Event    []byte                `json:"event"`
	Head     merkle.SignedTreeHead `json:"head"`
	Proof    merkle.InclusionProof `json:"proof"`
}

// LogInclusion proves the event at sequence seq under the signed log head
// of treeSize leaves (0: the current size).
func (g *Log) LogInclusion(ctx context.Context, seq, treeSize uint64) (*LogInclusion, error) {
	s, err := g.signer()
	if err != nil {
		return nil, err
	}
	l, err := g.syncLog(ctx)
	if err != nil {
		return nil, err
	}
	i := sort.Search(len(l.seqs), func(i int) bool { return l.seqs[i] >= seq })
	found := i < len(l.seqs) && l.seqs[i] == seq
	corr := ""
	if found {
		corr = l.corrs[i]
	}
	head, err := g.logHeadLocked(l, s, treeSize)
	if err == nil && !found {
		err = fmt.Errorf("%w: no event at sequence %d", ErrBadSequence, seq)
	}
	var proof merkle.InclusionProof
	if err == nil {
		proof, err = l.tree.InclusionProof(uint64(i), head.TreeSize)
	}
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	recs, err := g.cfg.Store.Replay(ctx, evidence.Query{CorrelationID: corr, After: seq - 1, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(recs) != 1 || recs[0].Sequence != seq {
		return nil, fmt.Errorf("evlog: the store no longer returns sequence %d", seq)
	}
	return &LogInclusion{Sequence: seq, Event: recs[0].Data, Head: head, Proof: proof}, nil
}

// LogConsistency is a consistency proof between two signed log heads.
type LogConsistency struct {
	First  merkle.SignedTreeHead   `json:"first"`
	Second merkle.SignedTreeHead   `json:"second"`
	Proof  merkle.ConsistencyProof `json:"proof"`
}

// LogConsistency proves the log of size1 leaves is a prefix of the log of
// size2 leaves (size2 0: the current size), with both heads signed.
func (g *Log) LogConsistency(ctx context.Context, size1, size2 uint64) (*LogConsistency, error) {
	s, err := g.signer()
	if err != nil {
		return nil, err
	}
	l, err := g.syncLog(ctx)
	if err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	second, err := g.logHeadLocked(l, s, size2)
	if err != nil {
		return nil, err
	}
	if size1 > second.TreeSize {
		return nil, fmt.Errorf("%w: first size %d is past the second %d", ErrBadSequence, size1, second.TreeSize)
	}
	root1, err := l.tree.RootAt(size1)
	if err != nil {
		return nil, err
	}
	first, err := merkle.SignTreeHead(s, size1, root1, g.cfg.Now())
	if err != nil {
		return nil, err
	}
	proof, err := l.tree.ConsistencyProof(size1, second.TreeSize)
	if err != nil {
		return nil, err
	}
	return &LogConsistency{First: first, Second: second, Proof: proof}, nil
}
