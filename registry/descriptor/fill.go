package descriptor

import (
	"github.com/capmesh/capmesh/canonical"
)

// WithNodeKey returns data with node_public_key set to key when the member
// is missing or null, for a signer that fills it in from its own key. It is
// byte-faithful: data is read with the order- and literal-preserving reader
// of package canonical and written back with every other member, every
// number literal ("1.0", "12345678901234567890", "8443.0") and every string
// (lone surrogates included) exactly as given, so Parse then judges, and
// Sign then covers, the values the author wrote. When node_public_key is
// present and not null, data is returned unchanged. Errors are *Error
// (invalid_json, invalid_json_object).
func WithNodeKey(data []byte, key string) ([]byte, error) {
	v, err := canonical.Parse(data)
	if err != nil {
		return nil, errorf(CodeInvalidJSON, "body is not valid JSON: %v", err)
	}
	if v.Kind != canonical.Object {
		return nil, errorf(CodeInvalidJSONObject, "body must be a JSON object")
	}
	keyValue := canonical.Value{Kind: canonical.String, Str: key}
	obj := make([]canonical.Member, 0, len(v.Obj)+1)
	found := false
	for _, m := range v.Obj {
		if m.Key == "node_public_key" {
			if m.Value.Kind != canonical.Null {
				return data, nil
			}
			m.Value, found = keyValue, true
		}
		obj = append(obj, m)
	}
	if !found {
		obj = append(obj, canonical.Member{Key: "node_public_key", Value: keyValue})
	}
	out, err := canonical.Value{Kind: canonical.Object, Obj: obj}.AppendJSON(make([]byte, 0, len(data)+80))
	if err != nil {
		return nil, errorf(CodeInvalidJSON, "body cannot be rewritten: %v", err)
	}
	return out, nil
}
