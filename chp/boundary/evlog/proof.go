package evlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
)

// ErrUnknownCorrelation is returned by Export and Verify for a correlation
// without evidence.
var ErrUnknownCorrelation = errors.New("evlog: no evidence for this correlation")

// ErrBadQuery reports an invalid replay query.
var ErrBadQuery = errors.New("evlog: invalid replay query")

// Replay returns the evidence of one correlation in sequence order
// (chp-v0.1.md §10). SinceSequence is exclusive; Limit is capped by the
// host (Truncated says more remain); IncludePayloads=false replaces each
// payload with {}.
func (g *Log) Replay(ctx context.Context, q chp.ReplayQuery) (*chp.ReplayResult, error) {
	if q.CorrelationID == "" {
		return nil, fmt.Errorf("%w: correlation_id is required", ErrBadQuery)
	}
	limit := g.cfg.MaxReplayLimit
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
	recs, err := g.cfg.Store.Replay(ctx, evidence.Query{CorrelationID: q.CorrelationID, After: after, Limit: limit + 1})
	if err != nil {
		return nil, fmt.Errorf("evlog: replay: %w", err)
	}
	res := &chp.ReplayResult{CorrelationID: q.CorrelationID, ReplayedAt: chp.FormatTime(g.cfg.Now()), Events: []json.RawMessage{}}
	if len(recs) > limit {
		recs, res.Truncated = recs[:limit], true
	}
	strip := q.IncludePayloads != nil && !*q.IncludePayloads
	for _, r := range recs {
		data := json.RawMessage(r.Data)
		if strip {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(data, &m); err != nil {
				return nil, fmt.Errorf("evlog: stored event %d: %w", r.Sequence, err)
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
// (chp-http-binding.md §4) with chp.VerifyChain: every content hash, every
// prev_hash link, every payload commitment and capmesh's attribution binding.
// A correlation without evidence is ErrUnknownCorrelation, never a valid
// empty chain: "valid, 0 events" would vouch for a correlation this host
// never saw.
func (g *Log) Verify(ctx context.Context, correlationID string) (*chp.ChainVerification, error) {
	recs, err := g.cfg.Store.Replay(ctx, evidence.Query{CorrelationID: correlationID})
	if err != nil {
		return nil, fmt.Errorf("evlog: verify: %w", err)
	}
	if len(recs) == 0 {
		return nil, ErrUnknownCorrelation
	}
	events := make([]chp.StoredEvent, len(recs))
	for i, r := range recs {
		events[i] = chp.StoredEvent{Sequence: r.Sequence, Data: r.Data, ContentHash: r.ContentHash, PrevHash: r.PrevHash}
	}
	return chp.VerifyChain(correlationID, events), nil
}

// Export returns the evidence bundle of one correlation (chp-v0.2.md §3)
// with a chp-completeness-v1 claim as of the store's last sequence; signed
// with the host key when the host has one.
func (g *Log) Export(ctx context.Context, correlationID string) (*chp.EvidenceBundle, error) {
	asOf := g.cfg.Store.LastSequence()
	recs, err := g.cfg.Store.Replay(ctx, evidence.Query{CorrelationID: correlationID})
	if err != nil {
		return nil, fmt.Errorf("evlog: export: %w", err)
	}
	if len(recs) == 0 {
		return nil, ErrUnknownCorrelation
	}
	bundle := &chp.EvidenceBundle{
		Assurance: "hash-chain", Canonicalization: chp.Canonicalization, CreatedAt: chp.FormatTime(g.cfg.Now()),
		HostID: g.cfg.HostID, ProtocolVersion: chp.ProtocolVersion,
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
	bundle.RootHash = chp.RootHash(hashes)
	bundle.Completeness = &chp.Completeness{AsOfSequence: asOf, CorrelationID: correlationID, HeadHash: tail.ContentHash, Scheme: chp.CompletenessScheme}
	if g.cfg.Key != nil {
		if err := chp.SignBundle(bundle, g.cfg.Key); err != nil {
			return nil, err
		}
	}
	return bundle, nil
}
