package chp

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
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

// ProtocolSchema returns the compiled upstream JSON Schema of a CHP object by
// file stem, e.g. "invocation-result" or "evidence-event".
func ProtocolSchema(name string) (*jsonschema.Schema, error) {
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
		return nil, fmt.Errorf("chp: no schema %q", name)
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

// ValidateObject validates the JSON encoding of v against the named CHP
// schema.
func ValidateObject(name string, v any) error {
	s, err := ProtocolSchema(name)
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

// payloadSchema is a compiled capability input or output schema.
type payloadSchema struct {
	id string
	s  *jsonschema.Schema
}

// compilePayloadSchema compiles a capability's declared schema; nil when the
// schema is absent or the empty object (no constraint).
func compilePayloadSchema(id string, raw json.RawMessage) (*payloadSchema, error) {
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
	url := "capmesh:" + id
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	return &payloadSchema{id: id, s: s}, nil
}

// validate checks data; it returns the JSON pointer of the first failing
// location and a message, or ok.
func (p *payloadSchema) validate(data json.RawMessage) (path, msg string, ok bool) {
	if isNull(data) {
		data = json.RawMessage("null")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return "", "not JSON: " + err.Error(), false
	}
	err = p.s.Validate(inst)
	if err == nil {
		return "", "", true
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		leaf := ve
		for len(leaf.Causes) > 0 {
			leaf = leaf.Causes[0]
		}
		path = "/" + strings.Join(leaf.InstanceLocation, "/")
		msg = fmt.Sprint(leaf.ErrorKind)
		return path, msg, false
	}
	return "", err.Error(), false
}
