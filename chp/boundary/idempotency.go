package boundary

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/internal/evjson"
	"github.com/capmesh/capmesh/chp/boundary/internal/replaycache"
)

// requestDigest identifies what env asks for, for idempotent replay
// (chp-v0.2.md §13): sha256 of the JSON array [capability_id, version,
// requested_capability_version, mode, payload, subject], payload and
// subject canonical (subjectC is the invocation header's). A retry of the
// same request matches — whatever its key order, whitespace, correlation
// or requested_at — a different payload, capability, version, mode or
// caller does not. The bytes hashed are written into buf, which is returned
// for reuse.
func requestDigest(buf []byte, env *chp.InvocationEnvelope, subjectC []byte) (replaycache.RequestDigest, []byte) {
	b := append(buf[:0], '[')
	b = canonical.AppendChpStableString(b, env.CapabilityID)
	b = append(b, ", "...)
	b = evjson.AppendNullableString(b, env.Version)
	b = append(b, ", "...)
	b = evjson.AppendNullableString(b, env.RequestedCapabilityVersion)
	b = append(b, ", "...)
	b = canonical.AppendChpStableString(b, env.Mode)
	b = append(b, ", "...)
	n := len(b)
	if v, err := canonical.Parse(env.Payload); err == nil {
		b, err = canonical.PythonSortKeys.AppendCanonical(b, v)
		if err != nil {
			b = b[:n]
		}
	}
	if len(b) == n {
		// A payload that is not strict JSON (an envelope built in Go)
		// counts as its bytes.
		b = canonical.AppendChpStableString(b, string(env.Payload))
	}
	b = append(b, ", "...)
	b = append(b, subjectC...)
	b = append(b, ']')
	return sha256.Sum256(b), b[:0]
}

// idempotencyConflict answers an invocation_id already recorded for a
// different request: a processed denial with evidence, never recorded for
// replay (the id keeps replaying its first request's result).
func (b *Boundary) idempotencyConflict(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	inv.noRecord = true
	env := inv.env
	return b.finishDenied(ctx, inv, b.denial(chp.CodeIdempotencyConflict,
		fmt.Sprintf("invocation_id %q was already used for a different request", env.InvocationID),
		map[string]any{"invocation_id": env.InvocationID,
			"hint": "retry with the same capability, version, mode, payload and caller to replay its result, or use a fresh invocation_id"}))
}
