package chp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capmesh/capmesh/evidence"
)

// ErrUnknownCorrelation is returned by Export for a correlation without
// evidence.
var ErrUnknownCorrelation = errors.New("chp: no evidence for this correlation")

// ErrBadQuery reports an invalid replay query.
var ErrBadQuery = errors.New("chp: invalid replay query")

// Replay returns the evidence of one correlation in sequence order
// (chp-v0.1.md §10). SinceSequence is exclusive; Limit is capped by the
// host (Truncated says more remain); IncludePayloads=false replaces each
// payload with {}.
func (b *Boundary) Replay(ctx context.Context, q ReplayQuery) (*ReplayResult, error) {
	if q.CorrelationID == "" {
		return nil, fmt.Errorf("%w: correlation_id is required", ErrBadQuery)
	}
	limit := b.cfg.MaxReplayLimit
	if q.Limit != nil {
		if *q.Limit < 1 {
			return nil, fmt.Errorf("%w: limit must be at least 1", ErrBadQuery)
		}
		limit = min(*q.Limit, limit)
	}
	var after uint64
	if q.SinceSequence != nil {
		after = *q.SinceSequence
	}
	recs, err := b.store.Replay(ctx, evidence.Query{CorrelationID: q.CorrelationID, After: after, Limit: limit + 1})
	if err != nil {
		return nil, fmt.Errorf("chp: replay: %w", err)
	}
	res := &ReplayResult{CorrelationID: q.CorrelationID, ReplayedAt: FormatTime(b.now()), Events: []json.RawMessage{}}
	if len(recs) > limit {
		recs, res.Truncated = recs[:limit], true
	}
	strip := q.IncludePayloads != nil && !*q.IncludePayloads
	for _, r := range recs {
		data := json.RawMessage(r.Data)
		if strip {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(data, &m); err != nil {
				return nil, fmt.Errorf("chp: stored event %d: %w", r.Sequence, err)
			}
			m["payload"] = json.RawMessage("{}")
			data, _ = json.Marshal(m)
		}
		res.Events = append(res.Events, data)
	}
	res.EventCount = len(res.Events)
	return res, nil
}

// Verify recomputes one correlation's hash chain from the store
// (chp-http-binding.md §4): every content hash, every prev_hash link, every
// payload commitment and capmesh's field binding.
func (b *Boundary) Verify(ctx context.Context, correlationID string) (*ChainVerification, error) {
	recs, err := b.store.Replay(ctx, evidence.Query{CorrelationID: correlationID})
	if err != nil {
		return nil, fmt.Errorf("chp: verify: %w", err)
	}
	v := &ChainVerification{CorrelationID: correlationID, EventCount: len(recs), Valid: true}
	prev := ""
	for _, r := range recs {
		problem := ""
		ev, err := decodeEvent(r.Data)
		switch {
		case err != nil:
			problem = "undecodable event: " + err.Error()
		case ev.text("content_hash") == "":
			v.UnverifiedCount++
			problem = "event has no content_hash"
		default:
			stored := ev.text("content_hash")
			s, err := ev.stable()
			switch {
			case err != nil:
				problem = err.Error()
			case ev.text("prev_hash") != prev || r.PrevHash != prev:
				problem = "prev_hash does not link to the previous event"
			case s.contentHash(prev) != stored || r.ContentHash != stored:
				problem = "content_hash mismatch"
			case ev.text("hash_scheme") == EventHashV2 && !ev.payloadMatchesCommitment():
				problem = "payload does not match payload_commitment"
			default:
				if mism, has, err := checkBinding(ev); has && (err != nil || len(mism) > 0) {
					problem = fmt.Sprintf("bound fields edited: %v", mism)
				}
			}
		}
		if problem != "" {
			if v.Valid {
				seq := r.Sequence
				v.FirstBrokenSequence = &seq
				v.Reason = fmt.Sprintf("sequence %d: %s", r.Sequence, problem)
			}
			v.Valid = false
			v.Problems = append(v.Problems, fmt.Sprintf("sequence %d: %s", r.Sequence, problem))
		} else {
			v.VerifiedCount++
		}
		prev = r.ContentHash
	}
	return v, nil
}

// Export returns the evidence bundle of one correlation (chp-v0.2.md §3)
// with a chp-completeness-v1 claim as of the store's last sequence; signed
// with the host key when the host has one.
func (b *Boundary) Export(ctx context.Context, correlationID string) (*EvidenceBundle, error) {
	asOf := b.store.LastSequence()
	recs, err := b.store.Replay(ctx, evidence.Query{CorrelationID: correlationID})
	if err != nil {
		return nil, fmt.Errorf("chp: export: %w", err)
	}
	if len(recs) == 0 {
		return nil, ErrUnknownCorrelation
	}
	bundle := &EvidenceBundle{
		Assurance: "hash-chain", Canonicalization: Canonicalization, CreatedAt: FormatTime(b.now()),
		HostID: b.cfg.HostID, ProtocolVersion: ProtocolVersion,
	}
	hashes := make([]string, len(recs))
	for i, r := range recs {
		bundle.Events = append(bundle.Events, json.RawMessage(r.Data))
		hashes[i] = r.ContentHash
	}
	tail := recs[len(recs)-1]
	if tail.Sequence > asOf {
		asOf = tail.Sequence
	}
	bundle.RootHash = RootHash(hashes)
	bundle.Completeness = &Completeness{AsOfSequence: asOf, CorrelationID: correlationID, HeadHash: tail.ContentHash, Scheme: CompletenessScheme}
	if b.cfg.Key != nil {
		if err := SignBundle(bundle, b.cfg.Key); err != nil {
			return nil, err
		}
	}
	return bundle, nil
}
