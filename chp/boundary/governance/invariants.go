package governance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capmesh/capmesh/chp"
	"github.com/google/cel-go/cel"
)

// An Invariant is one compiled host-enforced invariant.
type Invariant struct {
	// Desc is the invariant as declared (defaults completed).
	Desc  *chp.InvariantDescriptor
	check func(ctx context.Context, env *chp.InvocationEnvelope) (ok bool, msg string, err error)
}

// Check evaluates the invariant against env: ok, or the message saying
// why it does not hold. The error says it could not be evaluated.
func (c Invariant) Check(ctx context.Context, env *chp.InvocationEnvelope) (ok bool, msg string, err error) {
	return c.check(ctx, env)
}

// celEnv declares what an expression invariant sees: payload (the payload
// object), capability_id, subject and metadata.
var celEnv, celEnvErr = cel.NewEnv(
	cel.Variable("payload", cel.DynType),
	cel.Variable("capability_id", cel.StringType),
	cel.Variable("subject", cel.DynType),
	cel.Variable("metadata", cel.DynType),
)

// celCostLimit bounds the work one expression evaluation may do.
const celCostLimit = 100000

// CompileInvariant compiles a host-enforced invariant. Kinds:
//
//	required_payload_fields  parameters {"fields": ["a", "b"]}
//	max_payload_bytes        parameters {"max_bytes": 4096}
//	expression               parameters {"expression": "<CEL>", "message": "..."}
//
// An expression invariant holds when its CEL expression evaluates to true.
func CompileInvariant(inv *chp.InvariantDescriptor) (Invariant, error) {
	c := Invariant{Desc: inv}
	switch inv.Kind {
	case "required_payload_fields":
		var p struct {
			Fields []string `json:"fields"`
		}
		if err := json.Unmarshal(inv.Parameters, &p); err != nil || len(p.Fields) == 0 {
			return c, fmt.Errorf("required_payload_fields needs parameters.fields (a non-empty list of names)")
		}
		c.check = func(_ context.Context, env *chp.InvocationEnvelope) (bool, string, error) {
			var payload map[string]json.RawMessage
			if err := json.Unmarshal(env.Payload, &payload); err != nil {
				return false, "", err
			}
			var missing []string
			for _, f := range p.Fields {
				if !payloadHasField(payload, f) {
					missing = append(missing, f)
				}
			}
			if len(missing) > 0 {
				return false, "Missing required payload fields: " + strings.Join(missing, ", "), nil
			}
			return true, "", nil
		}
	case "max_payload_bytes":
		var p struct {
			MaxBytes *int `json:"max_bytes"`
		}
		if err := json.Unmarshal(inv.Parameters, &p); err != nil || p.MaxBytes == nil || *p.MaxBytes < 0 {
			return c, fmt.Errorf("max_payload_bytes needs parameters.max_bytes (a non-negative integer)")
		}
		c.check = func(_ context.Context, env *chp.InvocationEnvelope) (bool, string, error) {
			if n := len(env.Payload); n > *p.MaxBytes {
				return false, fmt.Sprintf("Payload is %d bytes, over max_payload_bytes %d", n, *p.MaxBytes), nil
			}
			return true, "", nil
		}
	case "expression":
		var p struct {
			Expression string `json:"expression"`
			Message    string `json:"message"`
		}
		if err := json.Unmarshal(inv.Parameters, &p); err != nil || strings.TrimSpace(p.Expression) == "" {
			return c, fmt.Errorf("expression needs parameters.expression (a CEL expression)")
		}
		if celEnvErr != nil {
			return c, celEnvErr
		}
		ast, iss := celEnv.Compile(p.Expression)
		if iss != nil && iss.Err() != nil {
			return c, fmt.Errorf("CEL: %w", iss.Err())
		}
		if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
			return c, fmt.Errorf("CEL expression must be boolean, is %v", ast.OutputType())
		}
		prg, err := celEnv.Program(ast, cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100))
		if err != nil {
			return c, fmt.Errorf("CEL: %w", err)
		}
		msg := p.Message
		if msg == "" {
			msg = "Invariant expression does not hold: " + p.Expression
		}
		c.check = func(ctx context.Context, env *chp.InvocationEnvelope) (bool, string, error) {
			vars := map[string]any{"capability_id": env.CapabilityID}
			for name, raw := range map[string]json.RawMessage{"payload": env.Payload, "subject": env.Subject, "metadata": env.Metadata} {
				var v any = map[string]any{}
				if !isNull(raw) { // absent or null: {}
					if err := json.Unmarshal(raw, &v); err != nil {
						return false, "", err
					}
				}
				vars[name] = v
			}
			out, _, err := prg.ContextEval(ctx, vars)
			if err != nil {
				return false, "", err
			}
			ok, isBool := out.Value().(bool)
			if !isBool {
				return false, "", fmt.Errorf("expression returned %v, not a boolean", out.Type())
			}
			if !ok {
				return false, msg, nil
			}
			return true, "", nil
		}
	default:
		return c, fmt.Errorf("unknown host-enforced invariant kind %q (want required_payload_fields, max_payload_bytes or expression)", inv.Kind)
	}
	return c, nil
}

// isNull reports whether r is absent or JSON null.
func isNull(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null"
}
