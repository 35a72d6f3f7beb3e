package chprpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/chp/witnessing"
	"github.com/capmesh/capmesh/jsonrpc"
)

// WitnessHandlers returns the JSON-RPC counterparts of the HTTP witnessing
// routes (docs/chp-jsonrpc-binding.md, "Witnessing and the event log"):
// chp.head, chp.head.inclusion, chp.head.consistency, chp.witness,
// chp.witnesses, chp.anchor, chp.anchors, chp.log.head, chp.log.inclusion
// and chp.log.consistency. A host mounts them beside Handlers.
func WitnessHandlers(b *boundary.Boundary) map[string]jsonrpc.Handler {
	type seqs struct {
		Scheme        string  `json:"scheme"`
		CorrelationID string  `json:"correlation_id"`
		Sequence      *uint64 `json:"sequence"`
		TreeSize      uint64  `json:"tree_size"`
		First         *uint64 `json:"first"`
		Second        *uint64 `json:"second"`
	}
	params := func(req *jsonrpc.Request) (seqs, error) {
		var p seqs
		if len(bytes.TrimSpace(req.Params)) == 0 || string(bytes.TrimSpace(req.Params)) == "null" {
			return p, nil
		}
		return p, req.UnmarshalParams(&p)
	}
	need := func(name string, v *uint64) error {
		if v == nil {
			return jsonrpc.Errorf(jsonrpc.InvalidParams, "%s is required", name)
		}
		return nil
	}
	h := func(fn func(ctx context.Context, p seqs, req *jsonrpc.Request) (any, error)) jsonrpc.Handler {
		return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			p, err := params(req)
			if err != nil {
				return nil, err
			}
			v, err := fn(ctx, p, req)
			if err != nil {
				return nil, witnessError(err)
			}
			return v, nil
		})
	}
	return map[string]jsonrpc.Handler{
		"chp.head": h(func(ctx context.Context, p seqs, _ *jsonrpc.Request) (any, error) {
			return b.Head(ctx, p.Scheme)
		}),
		"chp.head.inclusion": h(func(ctx context.Context, p seqs, _ *jsonrpc.Request) (any, error) {
			head, proof, err := b.HeadInclusion(ctx, p.CorrelationID)
			if err != nil {
				return nil, err
			}
			return map[string]any{"host_id": head.HostID, "scheme": head.Scheme, "sequence": head.Sequence,
				"store_head": head.StoreHead, "proof": proof}, nil
		}),
		"chp.head.consistency": h(func(ctx context.Context, p seqs, _ *jsonrpc.Request) (any, error) {
			if p.First == nil || p.Second == nil {
				return nil, need("first and second", nil)
			}
			return b.HeadConsistency(ctx, *p.First, *p.Second)
		}),
		"chp.witness": jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			st, err := b.AcceptWitness(ctx, req.Params)
			if err != nil {
				return nil, witnessError(err)
			}
			return map[string]any{"accepted": true, "host_id": st.HostID, "sequence": st.Sequence,
				"store_head": st.StoreHead, "witness": st.Witness.HostID}, nil
		}),
		"chp.witnesses": h(func(ctx context.Context, _ seqs, _ *jsonrpc.Request) (any, error) {
			ws, err := b.Witnesses(ctx)
			return map[string]any{"witnesses": nonNil(ws)}, err
		}),
		"chp.anchor": jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			a, err := b.AcceptAnchor(ctx, req.Params)
			if err != nil {
				return nil, witnessError(err)
			}
			return map[string]any{"accepted": true, "host_id": a.HostID, "sequence": a.Sequence,
				"store_head": a.StoreHead, "did": a.Anchor.DID}, nil
		}),
		"chp.anchors": h(func(ctx context.Context, _ seqs, _ *jsonrpc.Request) (any, error) {
			as, err := b.Anchors(ctx)
			return map[string]any{"anchors": nonNil(as)}, err
		}),
		"chp.log.head": h(func(ctx context.Context, p seqs, _ *jsonrpc.Request) (any, error) {
			return b.LogHead(ctx, p.TreeSize)
		}),
		"chp.log.inclusion": h(func(ctx context.Context, p seqs, _ *jsonrpc.Request) (any, error) {
			if err := need("sequence", p.Sequence); err != nil {
				return nil, err
			}
			return b.LogInclusion(ctx, *p.Sequence, p.TreeSize)
		}),
		"chp.log.consistency": h(func(ctx context.Context, p seqs, _ *jsonrpc.Request) (any, error) {
			if err := need("first", p.First); err != nil {
				return nil, err
			}
			var second uint64
			if p.Second != nil {
				second = *p.Second
			}
			return b.LogConsistency(ctx, *p.First, second)
		}),
	}
}

func nonNil(v []json.RawMessage) []json.RawMessage {
	if v == nil {
		return []json.RawMessage{}
	}
	return v
}

// witnessError maps a witnessing refusal to -32602 Invalid params whose
// data names the CHP code ({"code": "invalid_witness" | "head_mismatch" |
// "revocation_head_mismatch" | "bad_request" | "not_found" |
// "not_supported"}); a sidecar bound to -32046 (CodeQuotaExceeded) with
// data {"code": "issuer_quota_exceeded" | "sidecar_full"}; anything else is
// evidence unavailable.
func witnessError(err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	code := ""
	switch {
	case errors.Is(err, witnessing.ErrInvalidWitness):
		code = "invalid_witness"
	case errors.Is(err, evlog.ErrRevocationHeadMismatch):
		code = "revocation_head_mismatch"
	case errors.Is(err, evlog.ErrHeadMismatch):
		code = "head_mismatch"
	case errors.Is(err, evlog.ErrBadQuery), errors.Is(err, evlog.ErrBadSequence):
		code = "bad_request"
	case errors.Is(err, evlog.ErrUnknownCorrelation):
		return jsonrpc.Errorf(CodeNoEvidence, "%v", err)
	case errors.Is(err, evlog.ErrUnsigned), errors.Is(err, evlog.ErrNoHead):
		code = "not_supported"
	case errors.Is(err, evlog.ErrIssuerQuota):
		return jsonrpc.Errorf(CodeQuotaExceeded, "%v", err).WithData(map[string]string{"code": "issuer_quota_exceeded"})
	case errors.Is(err, evlog.ErrWitnessStoreFull):
		return jsonrpc.Errorf(CodeQuotaExceeded, "%v", err).WithData(map[string]string{"code": "sidecar_full"})
	default:
		return jsonrpc.Errorf(CodeEvidenceUnavailable, "%v", err)
	}
	return jsonrpc.Errorf(jsonrpc.InvalidParams, "%v", err).WithData(map[string]string{"code": code})
}
