package chprpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
)

// JSON-RPC error codes of capmesh's CHP binding (docs/chp-jsonrpc-binding.md).
// chp.invoke never uses them: a processed invocation is always a result. A
// direct capability call (kv.get) maps a non-success outcome to one of these,
// with the full InvocationResult as the error's data.
const (
	CodeDenied              jsonrpc.Code = errcatalog.CHPDenied
	CodeFailed              jsonrpc.Code = errcatalog.CHPFailed
	CodeSkipped             jsonrpc.Code = errcatalog.CHPSkipped
	CodeIndeterminate       jsonrpc.Code = errcatalog.CHPIndeterminate
	CodeEvidenceUnavailable jsonrpc.Code = errcatalog.CHPEvidenceUnavailable
	CodeNoEvidence          jsonrpc.Code = errcatalog.CHPNoEvidence
	// CodeQuotaExceeded: a sidecar refuses a statement (chp.witness,
	// chp.anchor, chp.revoke); data.code says which bound.
	CodeQuotaExceeded jsonrpc.Code = errcatalog.CHPQuotaExceeded
)

// Handlers returns the JSON-RPC binding of b: chp.describe, chp.invoke,
// chp.replay, chp.verify, chp.export, chp.revocations and chp.revoke,
// carrying exactly the objects of the HTTP binding. On a Unix socket with peer credentials the caller is bound
// as the verified subject ("uid:<n>", type "unix_peer").
func Handlers(b *boundary.Boundary) map[string]jsonrpc.Handler {
	m := map[string]jsonrpc.Handler{
		"chp.describe": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return b.Describe(), nil
		}),
		"chp.invoke": jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			if len(bytes.TrimSpace(req.Params)) == 0 {
				return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "chp.invoke takes an InvocationEnvelope object")
			}
			env, err := chp.ParseEnvelope(req.Params)
			if err != nil {
				return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "%v", err)
			}
			if c := rpcCaller(ctx); c != nil {
				ctx = boundary.WithCaller(ctx, c)
			}
			if env.Mode == "stream" {
				return invokeStream(ctx, b, req, env)
			}
			res, err := b.Invoke(ctx, env)
			if err != nil {
				return nil, evidenceError(err)
			}
			return res, nil
		}),
		"chp.replay": jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var q chp.ReplayQuery
			if err := req.UnmarshalParams(&q); err != nil {
				return nil, err
			}
			res, err := b.Replay(ctx, q)
			if errors.Is(err, evlog.ErrBadQuery) {
				return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "%v", err)
			}
			if err != nil {
				return nil, evidenceError(err)
			}
			return res, nil
		}),
		"chp.verify": jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			corr, err := correlationParam(req)
			if err != nil {
				return nil, err
			}
			v, err := b.Verify(ctx, corr)
			if errors.Is(err, evlog.ErrUnknownCorrelation) {
				return nil, jsonrpc.Errorf(CodeNoEvidence, "no evidence for correlation %q", corr)
			}
			if err != nil {
				return nil, evidenceError(err)
			}
			return v, nil
		}),
		"chp.export": jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			corr, err := correlationParam(req)
			if err != nil {
				return nil, err
			}
			bundle, err := b.Export(ctx, corr)
			if errors.Is(err, evlog.ErrUnknownCorrelation) {
				return nil, jsonrpc.Errorf(CodeNoEvidence, "no evidence for correlation %q", corr)
			}
			if err != nil {
				return nil, evidenceError(err)
			}
			return bundle, nil
		}),
	}
	maps.Copy(m, revocationHandlers(b))
	return m
}

func correlationParam(req *jsonrpc.Request) (string, error) {
	var p struct {
		CorrelationID string `json:"correlation_id"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return "", err
	}
	if p.CorrelationID == "" {
		return "", jsonrpc.Errorf(jsonrpc.InvalidParams, "correlation_id is required")
	}
	return p.CorrelationID, nil
}

func evidenceError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, chp.ErrBadEnvelope) {
		return jsonrpc.Errorf(jsonrpc.InvalidParams, "%v", err)
	}
	return jsonrpc.Errorf(CodeEvidenceUnavailable, "evidence could not be recorded: %v", err)
}

// rpcCaller returns the caller a JSON-RPC call is bound to: one bound
// already (WithCaller), else a Unix-socket peer's kernel-reported uid as the
// verified caller — unless the peer is another user who proved a family in
// a BTSP handshake, or a network peer that did, whose family is the
// verified caller ("family:<id>", btsp_family) — else none (nil).
func rpcCaller(ctx context.Context) *boundary.Caller {
	if c, ok := boundary.CallerFromContext(ctx); ok {
		return c
	}
	p, ok := jsonrpc.PeerFromContext(ctx)
	if ok && p.Family != "" && (!p.HasCred || int(p.UID) != os.Getuid()) {
		return boundary.FamilyCaller(p.Family)
	}
	if ok && p.HasCred {
		c, ok := peerCallers.Load(p.UID)
		if !ok {
			nc := boundary.NewCaller("uid:"+strconv.FormatUint(uint64(p.UID), 10), "unix_peer", nil)
			c, _ = peerCallers.LoadOrStore(p.UID, nc)
		}
		return c.(*boundary.Caller)
	}
	return nil
}

// peerCallers holds one immutable Caller per Unix uid seen (a host sees few).
var peerCallers sync.Map

// rpcMeta is the `_meta` member a direct call may carry in its params.
type rpcMeta struct {
	CorrelationID string                  `json:"correlation_id"`
	Correlation   *chp.CorrelationContext `json:"correlation"`
	InvocationID  string                  `json:"invocation_id"`
	Version       *string                 `json:"version"`
	// RequestedCapabilityVersion is a semver range (chp-v0.2.md §1).
	RequestedCapabilityVersion *string `json:"requested_capability_version"`
}

// EnvelopeFromRequest synthesizes the envelope of a direct JSON-RPC call of a
// capability method (`kv.get`): capability_id is the method, the payload is
// the params object without `_meta` (array params become {"args": [...]},
// absent params {}), and correlation, invocation_id, version and
// requested_capability_version come from params._meta when given (`_meta.correlation_id` or a full
// `_meta.correlation`). An invalid request is an InvalidParams *jsonrpc.Error.
func EnvelopeFromRequest(req *jsonrpc.Request) (*chp.InvocationEnvelope, error) {
	env := new(chp.InvocationEnvelope)
	if err := envelopeFromRequest(req, env); err != nil {
		return nil, err
	}
	return env, nil
}

// envelopeFromRequest is EnvelopeFromRequest filling *env.
func envelopeFromRequest(req *jsonrpc.Request, env *chp.InvocationEnvelope) error {
	*env = chp.InvocationEnvelope{CapabilityID: req.Method, Mode: "sync"}
	params := bytes.TrimSpace(req.Params)
	switch {
	case len(params) == 0 || string(params) == "null":
		env.Payload = json.RawMessage("{}")
	case params[0] == '[':
		env.Payload, _ = json.Marshal(map[string]json.RawMessage{"args": params})
	case params[0] == '{':
		if hasMeta, ok := objectHasKey(params, "_meta"); ok && !hasMeta {
			// The common case: no _meta, the params are the payload.
			env.Payload = append(json.RawMessage(nil), params...)
			break
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(params, &m); err != nil {
			return jsonrpc.Errorf(jsonrpc.InvalidParams, "params: %v", err)
		}
		if raw, ok := m["_meta"]; ok {
			delete(m, "_meta")
			var meta rpcMeta
			if err := json.Unmarshal(raw, &meta); err != nil {
				return jsonrpc.Errorf(jsonrpc.InvalidParams, "params._meta: %v", err)
			}
			if meta.Correlation != nil {
				env.Correlation = *meta.Correlation
			}
			if env.Correlation.CorrelationID == "" {
				env.Correlation.CorrelationID = meta.CorrelationID
			}
			env.InvocationID = meta.InvocationID
			env.Version = meta.Version
			env.RequestedCapabilityVersion = meta.RequestedCapabilityVersion
			env.Payload, _ = json.Marshal(m)
		} else {
			env.Payload = append(json.RawMessage(nil), params...)
		}
	default:
		return jsonrpc.Errorf(jsonrpc.InvalidParams, "params must be an object or an array")
	}
	return nil
}

// Reply maps an InvocationResult to a direct call's JSON-RPC answer:
// success → the result data (null when none); denied, failure, skipped and
// indeterminate → an *jsonrpc.Error (CodeDenied, CodeFailed, CodeSkipped,
// CodeIndeterminate) whose message names the reason and whose data is the
// complete InvocationResult, correlation and evidence ids included.
func Reply(res *chp.InvocationResult) (any, error) {
	switch res.Outcome {
	case chp.OutcomeSuccess:
		if res.Data == nil {
			return json.RawMessage("null"), nil
		}
		return res.Data, nil
	case chp.OutcomeDenied:
		return nil, jsonrpc.Errorf(CodeDenied, "denied: %s: %s", res.Denial.Code, res.Denial.Message).WithData(res)
	case chp.OutcomeSkipped:
		msg := "skipped"
		if res.Denial != nil {
			msg += ": " + res.Denial.Code
		}
		return nil, jsonrpc.Errorf(CodeSkipped, "%s", msg).WithData(res)
	case chp.OutcomeIndeterminate:
		return nil, jsonrpc.Errorf(CodeIndeterminate, "indeterminate: %s", errMsg(res.Error)).WithData(res)
	default:
		return nil, jsonrpc.Errorf(CodeFailed, "failed: %s", errMsg(res.Error)).WithData(res)
	}
}

// objectHasKey reports whether the JSON object obj has a top-level member
// named key. ok is false when the quick scan cannot tell (malformed input):
// the caller then decodes obj properly, which reports the error.
func objectHasKey(obj []byte, key string) (found, ok bool) {
	i := skipWS(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return false, skipWS(obj, i+1) == len(obj)
	}
	for i < len(obj) {
		if obj[i] != '"' {
			return false, false
		}
		end, escaped := skipString(obj, i)
		if end < 0 {
			return false, false
		}
		k := obj[i+1 : end-1]
		if escaped {
			var s string
			if json.Unmarshal(obj[i:end], &s) != nil {
				return false, false
			}
			k = []byte(s)
		}
		if string(k) == key {
			found = true
		}
		i = skipWS(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return false, false
		}
		vs := skipWS(obj, i+1)
		if i = skipValue(obj, vs); i <= vs {
			return false, false
		}
		i = skipWS(obj, i)
		switch {
		case i < len(obj) && obj[i] == ',':
			i = skipWS(obj, i+1)
		case i < len(obj) && obj[i] == '}':
			return found, skipWS(obj, i+1) == len(obj)
		default:
			return false, false
		}
	}
	return false, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset just past the string starting at b[i], or
// -1; escaped reports a backslash inside.
func skipString(b []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, escaped
}

// skipValue returns the offset just past the value starting at b[i], or -1.
// It tracks nesting and strings only; a value it passes may still be
// malformed, which the caller's decoder reports.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			end, _ := skipString(b, i)
			if end < 0 {
				return -1
			}
			i = end
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	if depth == 0 {
		return i
	}
	return -1
}

func errMsg(e *chp.ErrorInfo) string {
	if e == nil {
		return "unknown error"
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Type)
}

// DirectHandler returns a jsonrpc.Handler that routes a direct capability
// call through b: EnvelopeFromRequest → the gate pipeline → Reply.
func DirectHandler(b *boundary.Boundary) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		call := new(boundary.Call)
		if err := envelopeFromRequest(req, &call.Envelope); err != nil {
			return nil, err
		}
		var out any
		var rerr error
		err := b.InvokeCall(ctx, call, rpcCaller(ctx), func(res *chp.InvocationResult) {
			out, rerr = Reply(res) // copies what it answers
		})
		if err != nil {
			return nil, evidenceError(err)
		}
		return out, rerr
	})
}
