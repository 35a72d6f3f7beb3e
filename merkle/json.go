package merkle

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The JSON form of heads and proofs. Field names follow RFC 9162's
// structures (TreeHeadDataV2, InclusionProofDataV2, ConsistencyProofDataV2):
//
//	head:        {"tree_size":8,"timestamp":1795748400123,"root_hash":"<64 hex>","key_id":"<16 hex>","signature":"<128 hex>"}
//	inclusion:   {"leaf_index":5,"tree_size":8,"inclusion_path":["<64 hex>",...]}
//	consistency: {"tree_size_1":6,"tree_size_2":8,"consistency_path":["<64 hex>",...]}
//
// Every binary value is lowercase hex (the form CHP uses for its hashes),
// so that one byte string has one spelling. Sizes, indices and timestamps
// are JSON integers in [0, 2^53-1]. Parsing is strict: exactly the fields
// above, each once, none null, no other field, no trailing data, at most
// MaxPathLen hashes in a path and MaxJSONSize bytes in all; anything else
// is ErrMalformed. Marshalling writes the fields in the order shown, with
// no spaces, and an empty path as [].

// MaxJSONSize bounds the input of the Parse functions: a head is under 400
// bytes and a proof of MaxPathLen hashes under 4.5 KiB.
const MaxJSONSize = 16 << 10

// MarshalJSON writes the head's JSON form.
func (h SignedTreeHead) MarshalJSON() ([]byte, error) {
	b := []byte(`{"tree_size":`)
	b = strconv.AppendUint(b, h.TreeSize, 10)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendUint(b, h.Timestamp, 10)
	b = append(b, `,"root_hash":"`...)
	b = hex.AppendEncode(b, h.RootHash[:])
	b = append(b, `","key_id":`...)
	kid, err := json.Marshal(h.KeyID) // JSON quoting, whatever a caller put there
	if err != nil {
		return nil, err
	}
	b = append(b, kid...)
	b = append(b, `,"signature":"`...)
	b = hex.AppendEncode(b, h.Signature)
	return append(b, `"}`...), nil
}

// MarshalJSON writes the proof's JSON form.
func (p InclusionProof) MarshalJSON() ([]byte, error) {
	b := []byte(`{"leaf_index":`)
	b = strconv.AppendUint(b, p.LeafIndex, 10)
	b = append(b, `,"tree_size":`...)
	b = strconv.AppendUint(b, p.TreeSize, 10)
	b = append(b, `,"inclusion_path":`...)
	return append(appendPath(b, p.Path), '}'), nil
}

// MarshalJSON writes the proof's JSON form.
func (p ConsistencyProof) MarshalJSON() ([]byte, error) {
	b := []byte(`{"tree_size_1":`)
	b = strconv.AppendUint(b, p.TreeSize1, 10)
	b = append(b, `,"tree_size_2":`...)
	b = strconv.AppendUint(b, p.TreeSize2, 10)
	b = append(b, `,"consistency_path":`...)
	return append(appendPath(b, p.Path), '}'), nil
}

func appendPath(b []byte, path []Hash) []byte {
	b = append(b, '[')
	for i, h := range path {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = hex.AppendEncode(b, h[:])
		b = append(b, '"')
	}
	return append(b, ']')
}

// ParseSignedTreeHead parses a head's strict JSON form. It checks the form
// only; Verify checks the signature.
func ParseSignedTreeHead(data []byte) (SignedTreeHead, error) {
	var h SignedTreeHead
	var root, keyID, sig string
	err := decodeStrict(data, "tree head", []field{
		{name: "tree_size", num: &h.TreeSize},
		{name: "timestamp", num: &h.Timestamp},
		{name: "root_hash", str: &root},
		{name: "key_id", str: &keyID},
		{name: "signature", str: &sig},
	})
	if err != nil {
		return SignedTreeHead{}, err
	}
	if h.RootHash, err = ParseHash(root); err != nil {
		return SignedTreeHead{}, fmt.Errorf("tree head root_hash: %w", err)
	}
	var id [8]byte
	if err := decodeLowerHex(id[:], keyID); err != nil {
		return SignedTreeHead{}, fmt.Errorf("%w: tree head key_id: %w", ErrMalformed, err)
	}
	h.KeyID = keyID
	h.Signature = make([]byte, 64)
	if err := decodeLowerHex(h.Signature, sig); err != nil {
		return SignedTreeHead{}, fmt.Errorf("%w: tree head signature: %w", ErrMalformed, err)
	}
	return h, nil
}

// ParseInclusionProof parses an inclusion proof's strict JSON form. It
// checks the form only; Verify checks the proof.
func ParseInclusionProof(data []byte) (InclusionProof, error) {
	var p InclusionProof
	var path []string
	err := decodeStrict(data, "inclusion proof", []field{
		{name: "leaf_index", num: &p.LeafIndex},
		{name: "tree_size", num: &p.TreeSize},
		{name: "inclusion_path", list: &path},
	})
	if err != nil {
		return InclusionProof{}, err
	}
	if p.Path, err = parsePath(path); err != nil {
		return InclusionProof{}, fmt.Errorf("inclusion_path: %w", err)
	}
	return p, nil
}

// ParseConsistencyProof parses a consistency proof's strict JSON form. It
// checks the form only; Verify checks the proof.
func ParseConsistencyProof(data []byte) (ConsistencyProof, error) {
	var p ConsistencyProof
	var path []string
	err := decodeStrict(data, "consistency proof", []field{
		{name: "tree_size_1", num: &p.TreeSize1},
		{name: "tree_size_2", num: &p.TreeSize2},
		{name: "consistency_path", list: &path},
	})
	if err != nil {
		return ConsistencyProof{}, err
	}
	if p.Path, err = parsePath(path); err != nil {
		return ConsistencyProof{}, fmt.Errorf("consistency_path: %w", err)
	}
	return p, nil
}

// UnmarshalJSON is ParseSignedTreeHead, for heads inside larger documents.
func (h *SignedTreeHead) UnmarshalJSON(data []byte) (err error) {
	*h, err = ParseSignedTreeHead(data)
	return err
}

// UnmarshalJSON is ParseInclusionProof, for proofs inside larger documents.
func (p *InclusionProof) UnmarshalJSON(data []byte) (err error) {
	*p, err = ParseInclusionProof(data)
	return err
}

// UnmarshalJSON is ParseConsistencyProof, for proofs inside larger
// documents.
func (p *ConsistencyProof) UnmarshalJSON(data []byte) (err error) {
	*p, err = ParseConsistencyProof(data)
	return err
}

func parsePath(ss []string) ([]Hash, error) {
	path := make([]Hash, len(ss))
	for i, s := range ss {
		h, err := ParseHash(s)
		if err != nil {
			return nil, fmt.Errorf("hash %d: %w", i, err)
		}
		path[i] = h
	}
	return path, nil
}

// field is one member of a flat JSON object decodeStrict reads: exactly
// one of num (an integer in [0, MaxSize]), str (a string) and list (an
// array of at most MaxPathLen strings) is set.
type field struct {
	name string
	num  *uint64
	str  *string
	list *[]string
	seen bool
}

// decodeStrict reads data as one JSON object whose members are exactly
// fields, each once, and nothing after it.
func decodeStrict(data []byte, what string, fields []field) error {
	if len(data) > MaxJSONSize {
		return fmt.Errorf("%w: %s of %d bytes, more than %d", ErrMalformed, what, len(data), MaxJSONSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := expectDelim(dec, '{'); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, what, err)
	}
	for dec.More() {
		if err := decodeMember(dec, fields); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrMalformed, what, err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: %s: data after the object", ErrMalformed, what)
	}
	for _, f := range fields {
		if !f.seen {
			return fmt.Errorf("%w: %s: missing %q", ErrMalformed, what, f.name)
		}
	}
	return nil
}

// decodeMember reads one name and its value into the field of that name.
func decodeMember(dec *json.Decoder, fields []field) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	name, _ := tok.(string)
	var f *field
	for i := range fields {
		if fields[i].name == name {
			f = &fields[i]
		}
	}
	switch {
	case f == nil:
		return fmt.Errorf("unknown field %q", name)
	case f.seen:
		return fmt.Errorf("duplicate field %q", name)
	}
	f.seen = true
	if f.list != nil {
		list, err := decodeStrings(dec)
		if err != nil {
			return fmt.Errorf("%q: %w", name, err)
		}
		*f.list = list
		return nil
	}
	if tok, err = dec.Token(); err != nil {
		return err
	}
	if f.str != nil {
		s, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%q is not a string", name)
		}
		*f.str = s
		return nil
	}
	n, ok := tok.(json.Number)
	if !ok {
		return fmt.Errorf("%q is not a number", name)
	}
	v, err := parseSize(string(n))
	if err != nil {
		return fmt.Errorf("%q: %w", name, err)
	}
	*f.num = v
	return nil
}

// parseSize accepts a JSON number that is an integer in [0, MaxSize],
// written without sign, fraction or exponent.
func parseSize(s string) (uint64, error) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%s is not a non-negative integer", s)
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > MaxSize {
		return 0, fmt.Errorf("%s is past 2^53-1", s)
	}
	return v, nil
}

// decodeStrings reads an array of at most MaxPathLen strings.
func decodeStrings(dec *json.Decoder) ([]string, error) {
	if err := expectDelim(dec, '['); err != nil {
		return nil, err
	}
	list := []string{}
	for dec.More() {
		if len(list) == MaxPathLen {
			return nil, fmt.Errorf("more than %d hashes", MaxPathLen)
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		s, ok := tok.(string)
		if !ok {
			return nil, errors.New("an element is not a string")
		}
		list = append(list, s)
	}
	return list, expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("want %q, have %v", d, tok)
	}
	return nil
}
