package chp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"

	"github.com/capmesh/capmesh/canonical"
)

// Streaming invocations (chp-http-binding.md "Streaming invocations",
// chp-v0.2.md §13.1, proposals 0006 and 0012).
//
// A streaming invocation delivers zero or more chunk deltas before its
// terminal InvocationResult. The chunks are transport and serving state,
// never evidence: only their chp-chunk-seq-v1 digest and their count are
// committed, into the execution_completed payload.

// ChunkSeqScheme names the chunk-sequence digest of §13.1.
const ChunkSeqScheme = "chp-chunk-seq-v1"

// Members of a streaming execution_completed payload (omitted by every
// other completion).
const (
	ChunkCountKey     = "chunk_count"
	ChunkSeqDigestKey = "chunk_seq_digest"
)

// ErrChunkSeqMismatch is VerifyChunkSeq's answer to a chunk sequence that
// is not the one the evidence committed.
var ErrChunkSeqMismatch = errors.New("chp: chunk sequence does not match the committed chunk_seq_digest")

// ChunkSeq computes a chp-chunk-seq-v1 digest incrementally: sha256 over
// chp-stable-v1(delta) + "\n" for each delta, in order. The zero value is
// not usable; call NewChunkSeq.
type ChunkSeq struct {
	h   hash.Hash
	n   int
	buf []byte
}

// NewChunkSeq returns an empty chunk sequence.
func NewChunkSeq() *ChunkSeq { return &ChunkSeq{h: sha256.New()} }

// Add appends one delta (a JSON value). A delta that is not JSON, or that
// chp-stable-v1 cannot render, is an error and is not added.
func (s *ChunkSeq) Add(delta json.RawMessage) error {
	v, err := canonical.Parse(delta)
	if err != nil {
		return fmt.Errorf("chp: chunk delta: %w", err)
	}
	b, err := canonical.PythonSortKeys.AppendCanonical(s.buf[:0], v)
	if err != nil {
		return fmt.Errorf("chp: chunk delta: %w", err)
	}
	b = append(b, '\n')
	s.h.Write(b)
	s.buf = b[:0]
	s.n++
	return nil
}

// Count returns the number of deltas added.
func (s *ChunkSeq) Count() int { return s.n }

// Digest returns the lowercase hex digest of the deltas added so far.
func (s *ChunkSeq) Digest() string { return hex.EncodeToString(s.h.Sum(nil)) }

// ChunkSeqDigest returns the chp-chunk-seq-v1 digest of deltas.
func ChunkSeqDigest(deltas []json.RawMessage) (string, error) {
	s := NewChunkSeq()
	for i, d := range deltas {
		if err := s.Add(d); err != nil {
			return "", fmt.Errorf("delta %d: %w", i, err)
		}
	}
	return s.Digest(), nil
}

// VerifyChunkSeq checks a delivered chunk sequence (a fresh, replayed or
// reassembled resumed stream) against the execution_completed payload that
// committed it: its chunk_count and chunk_seq_digest must both match. A
// payload without a digest committed no stream and verifies nothing: an
// error, never a pass.
func VerifyChunkSeq(completedPayload json.RawMessage, deltas []json.RawMessage) error {
	var p struct {
		Count  *int    `json:"chunk_count"`
		Digest *string `json:"chunk_seq_digest"`
	}
	if err := json.Unmarshal(completedPayload, &p); err != nil {
		return fmt.Errorf("chp: execution_completed payload: %w", err)
	}
	if p.Digest == nil || p.Count == nil {
		return errors.New("chp: execution_completed payload commits no chunk sequence")
	}
	got, err := ChunkSeqDigest(deltas)
	if err != nil {
		return err
	}
	if *p.Count != len(deltas) || got != *p.Digest {
		return fmt.Errorf("%w: %d chunks digest %s, committed %d chunks digest %s",
			ErrChunkSeqMismatch, len(deltas), got, *p.Count, *p.Digest)
	}
	return nil
}
