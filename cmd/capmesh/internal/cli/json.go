package cli

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/capmesh/capmesh/canonical"
)

// ReadDoc reads one JSON document from path ("-" is the standard input of
// env) with the order-preserving reader, so collation ties keep document
// order. A missing file or a document that is not JSON is a usage error.
func ReadDoc(env Env, path string) (canonical.Value, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(env.Stdin(), 64<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return canonical.Value{}, UsageErrorf("%v", err)
		}
		return canonical.Value{}, err
	}
	v, err := canonical.Parse(data)
	if err != nil {
		name := path
		if path == "-" {
			name = "stdin"
		}
		return canonical.Value{}, UsageErrorf("%s: %v", name, strings.TrimPrefix(err.Error(), "canonical: "))
	}
	return v, nil
}

// WriteJSON writes v as JSON indented by two spaces, without escaping HTML.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
