package evlog

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
)

// The bounds of the witness sidecar (docs/limits.md). A statement is kept
// per issuer — a chain-witness statement under its witness's public key,
// a store-head anchor under its did:key — and in all.
const (
	// MaxSidecarEntries bounds the receipts, and separately the anchors,
	// a sidecar keeps.
	MaxSidecarEntries = 10000
	// MaxPerIssuer bounds the receipts (or anchors) of one issuer. Past it,
	// a statement over a later sequence than the issuer's oldest kept one
	// supersedes that one; any other is refused (ErrIssuerQuota).
	MaxPerIssuer = 16
	// MaxStatementBytes bounds one chain-witness statement or anchor as
	// posted (400 invalid_witness past it).
	MaxStatementBytes = 16 << 10
)

// ErrIssuerQuota: the statement's issuer holds MaxPerIssuer statements, none
// over an earlier sequence than this one (507 issuer_quota_exceeded,
// -32046). Nothing is kept.
var ErrIssuerQuota = errors.New("evlog: issuer_quota_exceeded: this issuer holds as many statements as the host keeps per issuer")

// errNotEntry marks a stored line that is not a statement the sidecar
// understands.
var errNotEntry = errors.New("not a sidecar statement")

// entry is one kept statement: its identity (the digest of the statement's
// bytes), its issuer and sequence, and the line stored.
type entry struct {
	digest [32]byte
	issuer string
	seq    uint64
	line   []byte
}

// shelf is one bounded, ordered list of statements (the receipts or the
// anchors): identical statements are kept once, each issuer holds at most
// MaxPerIssuer, the whole at most MaxSidecarEntries.
type shelf struct {
	entries   []entry
	digests   map[[32]byte]struct{}
	perIssuer map[string]int
}

// place decides where e goes: dup when an identical statement is kept
// (nothing to do), else victim, the index of the entry e supersedes (-1:
// none), or the refusal.
func (s *shelf) place(e entry) (dup bool, victim int, err error) {
	if _, ok := s.digests[e.digest]; ok {
		return true, -1, nil
	}
	if s.perIssuer[e.issuer] >= MaxPerIssuer {
		victim = -1
		for i, o := range s.entries {
			if o.issuer == e.issuer && o.seq < e.seq && (victim < 0 || o.seq < s.entries[victim].seq) {
				victim = i
			}
		}
		if victim < 0 {
			return false, -1, ErrIssuerQuota
		}
		return false, victim, nil
	}
	if len(s.entries) >= MaxSidecarEntries {
		return false, -1, ErrWitnessStoreFull
	}
	return false, -1, nil
}

// apply keeps e, dropping the entry at victim first (-1: none).
func (s *shelf) apply(e entry, victim int) {
	if s.digests == nil {
		s.digests = make(map[[32]byte]struct{})
		s.perIssuer = make(map[string]int)
	}
	if victim >= 0 {
		v := s.entries[victim]
		delete(s.digests, v.digest)
		s.perIssuer[v.issuer]--
		s.entries = append(s.entries[:victim], s.entries[victim+1:]...)
	}
	s.digests[e.digest] = struct{}{}
	s.perIssuer[e.issuer]++
	s.entries = append(s.entries, e)
}

// drop removes the entry whose digest is d (a superseded line at load).
func (s *shelf) drop(d [32]byte) {
	for i, o := range s.entries {
		if o.digest == d {
			delete(s.digests, d)
			s.perIssuer[o.issuer]--
			s.entries = append(s.entries[:i], s.entries[i+1:]...)
			return
		}
	}
}

// receiptEntry is the entry of a receipt: its issuer is the witness's
// public key, its digest that of the statement's bytes.
func receiptEntry(r Receipt) (entry, error) {
	var w struct {
		Sequence uint64 `json:"sequence"`
		Witness  struct {
			PublicKey string `json:"public_key"`
		} `json:"witness"`
	}
	if err := json.Unmarshal(r.Statement, &w); err != nil {
		return entry{}, fmt.Errorf("%w: %w", errNotEntry, err)
	}
	line, err := json.Marshal(r)
	if err != nil {
		return entry{}, err
	}
	return entry{digest: sha256.Sum256(r.Statement), issuer: "witness:" + w.Witness.PublicKey, seq: w.Sequence, line: line}, nil
}

// anchorEntry is the entry of an anchor: its issuer is the anchoring
// did:key.
func anchorEntry(raw json.RawMessage) (entry, error) {
	var a struct {
		Sequence uint64 `json:"sequence"`
		Anchor   struct {
			DID string `json:"did"`
		} `json:"anchor"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return entry{}, fmt.Errorf("%w: %w", errNotEntry, err)
	}
	return entry{digest: sha256.Sum256(raw), issuer: "anchor:" + a.Anchor.DID, seq: a.Sequence, line: raw}, nil
}
