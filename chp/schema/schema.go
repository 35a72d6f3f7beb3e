// Package schema holds the Capability Host Protocol's JSON Schemas — the
// upstream schemas of every protocol object, embedded — and validates
// against them: protocol objects a host emits or an auditor receives
// (Validate), and the input and output schemas capabilities declare, which
// the boundary checks at pipeline gates 9 and 12 (CompilePayload,
// Payload.Validate).
//
// Data flow:
//
//	schemas/*.schema.json (embedded) ──Protocol(name)──▶ compiled schema
//	Go value ──json──▶ Validate(name, v) ──▶ nil | the validator's error
//	declared schema ──CompilePayload──▶ *Payload (a $ref may name only an
//	  embedded protocol schema) ──Validate(data)──▶ JSON pointer + message
//	  (never quoting the data: it is recorded in evidence)
//
// It is apart from package chp so that verifying evidence needs no schema
// validator.
package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed schemas/*.schema.json
var schemaFS embed.FS

var (
	protoOnce     sync.Once
	protoCompiler *jsonschema.Compiler
	protoErr      error
	protoMu       sync.Mutex
	protoSchemas  = map[string]*jsonschema.Schema{}
)

// Protocol returns the compiled upstream JSON Schema of a CHP object by
// file stem, e.g. "invocation-result" or "evidence-event".
func Protocol(name string) (*jsonschema.Schema, error) {
	protoOnce.Do(func() {
		c := jsonschema.NewCompiler()
		entries, err := fs.ReadDir(schemaFS, "schemas")
		if err != nil {
			protoErr = err
			return
		}
		for _, e := range entries {
			b, err := schemaFS.ReadFile("schemas/" + e.Name())
			if err != nil {
				protoErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				protoErr = fmt.Errorf("%s: %w", e.Name(), err)
				return
			}
			id, _ := doc.(map[string]any)["$id"].(string)
			if err := c.AddResource(id, doc); err != nil {
				protoErr = fmt.Errorf("%s: %w", e.Name(), err)
				return
			}
			if err := c.AddResource("chp:"+strings.TrimSuffix(e.Name(), ".schema.json"), doc); err != nil {
				protoErr = err
				return
			}
		}
		protoCompiler = c
	})
	if protoErr != nil {
		return nil, protoErr
	}
	protoMu.Lock()
	defer protoMu.Unlock()
	if s, ok := protoSchemas[name]; ok {
		return s, nil
	}
	b, err := schemaFS.ReadFile("schemas/" + name + ".schema.json")
	if err != nil {
		return nil, fmt.Errorf("chp/schema: no schema %q", name)
	}
	var head struct {
		ID string `json:"$id"`
	}
	_ = json.Unmarshal(b, &head)
	s, err := protoCompiler.Compile(head.ID)
	if err != nil {
		return nil, err
	}
	protoSchemas[name] = s
	return s, nil
}

// Validate validates the JSON encoding of v against the named CHP schema
// (see Protocol).
func Validate(name string, v any) error {
	s, err := Protocol(name)
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// Payload is a compiled capability input or output schema.
type Payload struct{ s *jsonschema.Schema }

// PayloadURL is the URL a capability's input or output schema is
// compiled under: unique per capability, version and direction, and without
// a fragment — the validator reads a fragment as an anchor the schema would
// have to declare (docs/DECISIONS.md).
func PayloadURL(id, version, which string) string {
	return "capmesh:capability/" + url.PathEscape(id) + "/" + url.PathEscape(version) + "/" + which
}

// CompilePayload compiles a capability's declared schema under the URL u
// (PayloadURL); nil when the schema is absent or the empty object (no
// constraint). A schema must be
// self-contained: a $ref may point inside it or at an embedded CHP protocol
// schema, never at a file or the network.
func CompilePayload(u string, raw json.RawMessage) (*Payload, error) {
	if isNull(raw) {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	if m, ok := doc.(map[string]any); ok && len(m) == 0 {
		return nil, nil
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(protocolLoader{})
	if err := c.AddResource(u, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(u)
	if err != nil {
		return nil, err
	}
	return &Payload{s: s}, nil
}

// protocolLoader resolves a capability schema's external $ref: the CHP
// protocol schemas by their $id, and nothing else — registering a
// capability never reads a file or the network.
type protocolLoader struct{}

func (protocolLoader) Load(ref string) (any, error) {
	if name, ok := protocolSchemaIDs()[ref]; ok {
		b, err := schemaFS.ReadFile("schemas/" + name)
		if err != nil {
			return nil, err
		}
		return jsonschema.UnmarshalJSON(bytes.NewReader(b))
	}
	return nil, fmt.Errorf("external $ref %q: a capability schema must be self-contained (only the CHP protocol schemas may be referenced)", ref)
}

var protocolSchemaIDs = sync.OnceValue(func() map[string]string {
	ids := map[string]string{}
	entries, _ := fs.ReadDir(schemaFS, "schemas")
	for _, e := range entries {
		b, err := schemaFS.ReadFile("schemas/" + e.Name())
		if err != nil {
			continue
		}
		var head struct {
			ID string `json:"$id"`
		}
		if json.Unmarshal(b, &head) == nil && head.ID != "" {
			ids[head.ID] = e.Name()
		}
	}
	return ids
})

// english words validation failures (the validator's own messages).
var english = message.NewPrinter(language.English)

// maxSchemaFailures bounds how many failing locations a message names.
const maxSchemaFailures = 3

// Validate checks data (nil or empty: JSON null). When it fails, path is the JSON pointer of the first
// failing location (in instance-location order) and msg says what is wrong
// there and at up to two more locations, in the validator's English — e.g.
// "at /key: missing property 'value'". A message never quotes a value of
// data, only member names and what the schema wants: it is recorded in the
// evidence, which never holds payloads (docs/DECISIONS.md).
func (p *Payload) Validate(data json.RawMessage) (path, msg string, ok bool) {
	if isNull(data) {
		data = json.RawMessage("null")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return "/", "at /: not JSON", false
	}
	err = p.s.Validate(inst)
	if err == nil {
		return "", "", true
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "/", "at /: " + err.Error(), false
	}
	type failure struct{ path, msg string }
	var leaves []failure
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, failure{pointer(e.InstanceLocation), describeFailure(e.ErrorKind)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	// The validator visits an object's members in map order: sort, so the
	// same payload is always described — and its denial hashed — the same.
	slices.SortFunc(leaves, func(a, b failure) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	leaves = slices.Compact(leaves)
	var sb strings.Builder
	for i, l := range leaves {
		if i == maxSchemaFailures {
			fmt.Fprintf(&sb, "; and %d more", len(leaves)-i)
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString("at ")
		sb.WriteString(l.path)
		sb.WriteString(": ")
		sb.WriteString(l.msg)
	}
	return leaves[0].path, sb.String(), false
}

// pointer renders an instance location as a JSON pointer (RFC 6901).
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var sb strings.Builder
	for _, tok := range loc {
		sb.WriteByte('/')
		sb.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return sb.String()
}

// describeFailure words one failure without quoting the instance's values:
// the kinds whose library message would echo a value of the payload are
// worded from the schema side only.
func describeFailure(k jsonschema.ErrorKind) string {
	rat := func(r *big.Rat) string {
		if r == nil {
			return "?"
		}
		if r.IsInt() {
			return r.Num().String()
		}
		f, _ := r.Float64()
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	switch k := k.(type) {
	case *kind.Pattern:
		return fmt.Sprintf("string does not match pattern %s", strconv.Quote(k.Want))
	case *kind.Format:
		return fmt.Sprintf("value is not a valid %s", k.Want)
	case *kind.Minimum:
		return "value must be >= " + rat(k.Want)
	case *kind.Maximum:
		return "value must be <= " + rat(k.Want)
	case *kind.ExclusiveMinimum:
		return "value must be > " + rat(k.Want)
	case *kind.ExclusiveMaximum:
		return "value must be < " + rat(k.Want)
	case *kind.MultipleOf:
		return "value must be a multiple of " + rat(k.Want)
	case *kind.ContentMediaType:
		return fmt.Sprintf("value is not of media type %s", strconv.Quote(k.Want))
	case *kind.ContentEncoding:
		return fmt.Sprintf("value is not %s encoded", strconv.Quote(k.Want))
	case *kind.AdditionalProperties:
		k.Properties = slices.Sorted(slices.Values(k.Properties))
	}
	return k.LocalizedString(english)
}

// isNull reports whether r is absent or JSON null.
func isNull(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null"
}
