package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// InferSchema returns the JSON Schema (draft 2020-12) of the values of t as
// encoding/json writes and reads them: structs become objects whose fields
// are required unless tagged omitempty or omitzero and which allow no other
// members; a field's `jsonschema:"…"` tag becomes its description; integers
// keep their range. json.RawMessage and interface types have no schema
// (nil): anything goes.
//
// The schema is inferred by github.com/google/jsonschema-go (the inference
// the official MCP Go SDK uses) and validated, like every schema in capmesh,
// by the CHP boundary's validator.
func InferSchema(t reflect.Type) (json.RawMessage, error) {
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if base == rawMessageType || base.Kind() == reflect.Interface {
		return nil, nil
	}
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding the schema of %v: %w", t, err)
	}
	return b, nil
}

// boundarySchema returns the schema a capability declares as the CHP
// boundary receives it: nil when there is none (absent, null, true or {} —
// no constraint), else the schema unchanged, which must be a JSON object.
func boundarySchema(schema json.RawMessage) (json.RawMessage, error) {
	if len(schema) == 0 || string(schema) == "null" || string(schema) == "true" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(schema, &m); err != nil {
		return nil, fmt.Errorf("a schema must be a JSON object: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return schema, nil
}

// paramsValidator is a capability's input schema compiled by the project's
// one validator (santhosh-tekuri/jsonschema, draft 2020-12, as the CHP
// boundary compiles it). The boundary decides; the host uses this copy only
// to word the -32602 answer, on the error path.
type paramsValidator struct{ s *validator.Schema }

func compileParams(schema json.RawMessage) (*paramsValidator, error) {
	if schema == nil {
		return nil, nil
	}
	doc, err := validator.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := validator.NewCompiler()
	c.DefaultDraft(validator.Draft2020)
	if err := c.AddResource("capmesh:params", doc); err != nil {
		return nil, err
	}
	s, err := c.Compile("capmesh:params")
	if err != nil {
		return nil, err
	}
	return &paramsValidator{s}, nil
}

var english = message.NewPrinter(language.English)

// explain says what is wrong with payload: each failing location (a JSON
// pointer into params; the root when a member is missing or unexpected)
// and the reason, e.g. "missing property 'key'" or "at /ttl: got string,
// want integer". "" when payload is valid or cannot be explained.
func (p *paramsValidator) explain(payload json.RawMessage) string {
	if p == nil {
		return ""
	}
	inst, err := validator.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return "params are not JSON"
	}
	var ve *validator.ValidationError
	if !errors.As(p.s.Validate(inst), &ve) {
		return ""
	}
	var parts []string
	var walk func(e *validator.ValidationError)
	walk = func(e *validator.ValidationError) {
		if len(parts) >= 4 {
			return
		}
		if len(e.Causes) == 0 {
			msg := e.ErrorKind.LocalizedString(english)
			if len(e.InstanceLocation) > 0 {
				msg = "at /" + strings.Join(e.InstanceLocation, "/") + ": " + msg
			}
			parts = append(parts, msg)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(parts, "; ")
}
