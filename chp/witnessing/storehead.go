package witnessing

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

// The store-head schemes of chp-v0.2.md §12 and the revocation head of
// proposal 0010.
const (
	// StoreHeadV1 is the flat SHA-256 fold over the sorted
	// "correlation_id\x00head_hash\n" lines.
	StoreHeadV1 = "chp-store-head-v1"
	// StoreHeadV2 is the RFC 6962 Merkle tree over the same sorted lines
	// (proposal 0019). It is not append-only: see docs/witnessing.md.
	StoreHeadV2 = "chp-store-head-v2"
	// RevocationHeadV1 is SHA-256 over the sorted revocation identifiers.
	RevocationHeadV1 = "chp-revocation-head-v1"
)

// ErrUnknownScheme is returned for a store-head scheme this version does not
// compute.
var ErrUnknownScheme = errors.New("chp: unknown store-head scheme")

// StoreHead is what GET /head returns (chp-v0.2.md §12).
type StoreHead struct {
	HostID         string `json:"host_id"`
	Scheme         string `json:"scheme"`
	Sequence       uint64 `json:"sequence"`
	StoreHead      string `json:"store_head"`
	RevocationHead string `json:"revocation_head,omitempty"`
	At             string `json:"at"`
}

// StoreHeadLeaf is one correlation's leaf line, identical under v1 and v2:
// correlation_id, NUL, head_hash, newline.
func StoreHeadLeaf(correlationID, headHash string) []byte {
	b := make([]byte, 0, len(correlationID)+len(headHash)+2)
	b = append(b, correlationID...)
	b = append(b, 0)
	b = append(b, headHash...)
	return append(b, '\n')
}

// sortedLeaves returns the leaf lines of leaves (correlation id → head
// hash) in correlation-id byte order, and the ids in that order.
func sortedLeaves(leaves map[string]string) (ids []string, lines [][]byte) {
	ids = make([]string, 0, len(leaves))
	for id := range leaves {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	lines = make([][]byte, len(ids))
	for i, id := range ids {
		lines[i] = StoreHeadLeaf(id, leaves[id])
	}
	return ids, lines
}

// StoreHeadRoot computes the store head over leaves (correlation id → the
// content_hash of its last event at the head's sequence) under scheme,
// as lowercase hex.
func StoreHeadRoot(scheme string, leaves map[string]string) (string, error) {
	_, lines := sortedLeaves(leaves)
	switch scheme {
	case StoreHeadV1:
		h := sha256.New()
		for _, l := range lines {
			h.Write(l)
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	case StoreHeadV2:
		r := mth(lines)
		return hex.EncodeToString(r[:]), nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownScheme, scheme)
}

// RevocationHead is chp-revocation-head-v1 over the held revocation
// identifiers ("m\x00{mandate_id}\x00{principal key}" per mandate
// revocation, "k\x00{key_id}" per key revocation): SHA-256 over the sorted,
// de-duplicated identifiers, each followed by a newline. The empty set's
// head is SHA-256 of no bytes (EmptyRevocationHead).
func RevocationHead(ids []string) string {
	s := slices.Clone(ids)
	slices.Sort(s)
	s = slices.Compact(s)
	h := sha256.New()
	for _, id := range s {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// EmptyRevocationHead is the revocation head of a host that holds no
// revocation: SHA-256 of the empty string.
const EmptyRevocationHead = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// RFC 6962 over byte-string leaves, as chp-store-head-v2 specifies.

func leafHash(d []byte) [32]byte {
	return sha256.Sum256(append([]byte{0}, d...))
}

func nodeHash(l, r [32]byte) [32]byte {
	var b [65]byte
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[33:], r[:])
	return sha256.Sum256(b[:])
}

// split is the largest power of two strictly below n (n ≥ 2).
func split(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

func mth(leaves [][]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leafHash(leaves[0])
	}
	k := split(len(leaves))
	return nodeHash(mth(leaves[:k]), mth(leaves[k:]))
}

func auditPath(leaves [][]byte, i int) [][32]byte {
	if len(leaves) <= 1 {
		return nil
	}
	k := split(len(leaves))
	if i < k {
		return append(auditPath(leaves[:k], i), mth(leaves[k:]))
	}
	return append(auditPath(leaves[k:], i-k), mth(leaves[:k]))
}

func subproof(m int, leaves [][]byte, b bool) [][32]byte {
	n := len(leaves)
	if m == n {
		if b {
			return nil
		}
		return [][32]byte{mth(leaves)}
	}
	k := split(n)
	if m <= k {
		return append(subproof(m, leaves[:k], b), mth(leaves[k:]))
	}
	return append(subproof(m-k, leaves[k:], false), mth(leaves[:k]))
}

func hexPath(p [][32]byte) []string {
	out := make([]string, len(p))
	for i, h := range p {
		out[i] = hex.EncodeToString(h[:])
	}
	return out
}

func unhexPath(p []string) ([][32]byte, bool) {
	if len(p) > 64 {
		return nil, false
	}
	out := make([][32]byte, len(p))
	for i, s := range p {
		if len(s) != 64 {
			return nil, false
		}
		if _, err := hex.Decode(out[i][:], []byte(s)); err != nil {
			return nil, false
		}
	}
	return out, true
}

// StoreHeadInclusion is the store-head-inclusion object of proposal 0019:
// an RFC 6962 audit path for one correlation's leaf under a v2 root.
type StoreHeadInclusion struct {
	Scheme        string   `json:"scheme"`
	CorrelationID string   `json:"correlation_id"`
	HeadHash      string   `json:"head_hash"`
	LeafIndex     int      `json:"leaf_index"`
	TreeSize      int      `json:"tree_size"`
	AuditPath     []string `json:"audit_path"`
}

// NewStoreHeadInclusion proves correlationID's leaf under the v2 root of
// leaves; false if the correlation is not among them.
func NewStoreHeadInclusion(leaves map[string]string, correlationID string) (StoreHeadInclusion, bool) {
	head, ok := leaves[correlationID]
	if !ok {
		return StoreHeadInclusion{}, false
	}
	ids, lines := sortedLeaves(leaves)
	i, _ := slices.BinarySearch(ids, correlationID)
	return StoreHeadInclusion{Scheme: StoreHeadV2, CorrelationID: correlationID, HeadHash: head,
		LeafIndex: i, TreeSize: len(ids), AuditPath: hexPath(auditPath(lines, i))}, true
}

// VerifyStoreHeadInclusion reports whether p proves that correlationID's
// head headHash is committed under the v2 root (hex). It replays the
// prover's recursive split and needs every path entry.
func VerifyStoreHeadInclusion(root, correlationID, headHash string, p StoreHeadInclusion) bool {
	if p.Scheme != StoreHeadV2 || p.CorrelationID != correlationID || p.HeadHash != headHash {
		return false
	}
	if p.LeafIndex < 0 || p.LeafIndex >= p.TreeSize {
		return false
	}
	path, ok := unhexPath(p.AuditPath)
	if !ok {
		return false
	}
	var walk func(size, i int) ([32]byte, bool)
	walk = func(size, i int) ([32]byte, bool) {
		if size == 1 {
			return leafHash(StoreHeadLeaf(correlationID, headHash)), true
		}
		k := split(size)
		var sub [32]byte
		var ok bool
		if i < k {
			sub, ok = walk(k, i)
		} else {
			sub, ok = walk(size-k, i-k)
		}
		if !ok || len(path) == 0 {
			return sub, false
		}
		sib := path[0]
		path = path[1:]
		if i < k {
			return nodeHash(sub, sib), true
		}
		return nodeHash(sib, sub), true
	}
	got, ok := walk(p.TreeSize, p.LeafIndex)
	return ok && len(path) == 0 && hex.EncodeToString(got[:]) == root
}

// StoreHeadConsistency is the store-head-consistency object of proposal
// 0022: an RFC 6962 consistency proof between two v2 roots.
type StoreHeadConsistency struct {
	Scheme     string   `json:"scheme"`
	FirstSize  int      `json:"first_size"`
	SecondSize int      `json:"second_size"`
	FirstRoot  string   `json:"first_root"`
	SecondRoot string   `json:"second_root"`
	Proof      []string `json:"proof"`
}

// NewStoreHeadConsistency builds the proof exactly as proposal 0022 does:
// from the newer leaves and the older leaf count. It verifies only when the
// older sorted leaves are a prefix of the newer ones, which a new
// correlation sorting before an old one, or a new event in an old
// correlation, breaks — the v2 flaw (docs/witnessing.md).
func NewStoreHeadConsistency(older, newer map[string]string) StoreHeadConsistency {
	_, newLines := sortedLeaves(newer)
	m, n := len(older), len(newer)
	first, _ := StoreHeadRoot(StoreHeadV2, older)
	second := mth(newLines)
	var proof [][32]byte
	if m > 0 && m < n {
		proof = subproof(m, newLines, true)
	}
	return StoreHeadConsistency{Scheme: StoreHeadV2, FirstSize: m, SecondSize: n, FirstRoot: first,
		SecondRoot: hex.EncodeToString(second[:]), Proof: hexPath(proof)}
}

// VerifyStoreHeadConsistency reports whether p proves that the v2 tree with
// root newRoot extends the one with root oldRoot (both hex).
func VerifyStoreHeadConsistency(oldRoot, newRoot string, p StoreHeadConsistency) bool {
	if p.Scheme != StoreHeadV2 || p.FirstRoot != oldRoot || p.SecondRoot != newRoot {
		return false
	}
	m, n := p.FirstSize, p.SecondSize
	path, ok := unhexPath(p.Proof)
	if !ok || m < 0 || m > n {
		return false
	}
	switch {
	case m == 0:
		return len(path) == 0
	case m == n:
		return len(path) == 0 && oldRoot == newRoot
	}
	var first [32]byte
	if _, err := hex.Decode(first[:], []byte(oldRoot)); err != nil || len(oldRoot) != 64 {
		return false
	}
	var walk func(m, n int, b bool) (old, nw [32]byte, ok bool)
	walk = func(m, n int, b bool) (old, nw [32]byte, ok bool) {
		next := func() ([32]byte, bool) {
			if len(path) == 0 {
				return [32]byte{}, false
			}
			h := path[0]
			path = path[1:]
			return h, true
		}
		if m == n {
			if b {
				return first, first, true
			}
			h, ok := next()
			return h, h, ok
		}
		k := split(n)
		if m <= k {
			o, l, ok := walk(m, k, b)
			if !ok {
				return o, l, false
			}
			r, ok := next()
			return o, nodeHash(l, r), ok
		}
		or, nr, ok := walk(m-k, n-k, false)
		if !ok {
			return or, nr, false
		}
		l, ok := next()
		return nodeHash(l, or), nodeHash(l, nr), ok
	}
	old, nw, ok := walk(m, n, true)
	return ok && len(path) == 0 && hex.EncodeToString(old[:]) == oldRoot && hex.EncodeToString(nw[:]) == newRoot
}
