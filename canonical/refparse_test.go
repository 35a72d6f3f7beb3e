package canonical

import (
	"os"
	"testing"

	"fmt"
	"unicode/utf8"

	"github.com/capmesh/capmesh/internal/interleave"
	"github.com/google/go-cmp/cmp"
)

// refParseWith is the straightforward one-pass recursive reader capmesh
// used before the two-pass reader of parse.go: every container copies its
// children out of a growing stack when it closes. It is kept, in tests
// only, as the oracle for FuzzParseMatchesReference: the fast reader must
// accept exactly what this one accepts, report the same error at the same
// offset, and build the same tree.
func refParseWith(data []byte, opts *ParseOptions) (Value, error) {
	if len(data) > opts.maxBytes() {
		return Value{}, &ParseError{Offset: opts.maxBytes(), Err: ErrTooLarge,
			Detail: fmt.Sprintf("input is %d bytes, limit is %d", len(data), opts.maxBytes())}
	}
	// One conversion for the whole input: unescaped strings and number
	// literals become substrings of it, without further allocation.
	p := refParser{s: string(data), maxDepth: opts.maxDepth()}
	p.skipWS()
	if len(p.s) >= 3 && p.s[0] == 0xEF && p.s[1] == 0xBB && p.s[2] == 0xBF {
		return Value{}, p.fail(ErrSyntax, "byte-order mark (U+FEFF) before the JSON text")
	}
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipWS()
	if p.i < len(p.s) {
		return Value{}, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s after the JSON value", p.describe()))
	}
	return v, nil
}

type refParser struct {
	s        string
	i        int
	maxDepth int
	// stack holds the children of the containers being parsed; each
	// container copies its own span into an exactly sized slice when it
	// closes, so a tree costs one allocation per container.
	vals []Value
	mems []Member
	// buf collects the bytes of strings that contain escapes.
	buf []byte
}

func (p *refParser) fail(kind error, detail string) error {
	return &ParseError{Offset: p.i, Err: kind, Detail: detail}
}

func (p *refParser) failAt(off int, kind error, detail string) error {
	return &ParseError{Offset: off, Err: kind, Detail: detail}
}

// describe names the byte at the cursor for error messages.
func (p *refParser) describe() string {
	if p.i >= len(p.s) {
		return "end of input"
	}
	c := p.s[p.i]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *refParser) skipWS() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *refParser) value(depth int) (Value, error) {
	if p.i >= len(p.s) {
		return Value{}, p.fail(ErrSyntax, "unexpected end of input, want a value")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		return Value{Kind: String, Str: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		lit, err := p.number()
		return Value{Kind: Number, Str: lit}, err
	case c == 't':
		return Value{Kind: Bool, Bool: true}, p.literal("true")
	case c == 'f':
		return Value{Kind: Bool}, p.literal("false")
	case c == 'n':
		return Value{Kind: Null}, p.literal("null")
	default:
		return Value{}, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s, want a value", p.describe()))
	}
}

func (p *refParser) literal(word string) error {
	if len(p.s)-p.i >= len(word) && p.s[p.i:p.i+len(word)] == word {
		p.i += len(word)
		return nil
	}
	return p.fail(ErrSyntax, fmt.Sprintf("invalid literal, want %q", word))
}

func (p *refParser) enter(depth int) error {
	if depth > p.maxDepth {
		return p.fail(ErrTooDeep, fmt.Sprintf("nesting deeper than %d", p.maxDepth))
	}
	return nil
}

func (p *refParser) array(depth int) (Value, error) {
	if err := p.enter(depth); err != nil {
		return Value{}, err
	}
	p.i++ // '['
	base := len(p.vals)
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return Value{Kind: Array, Arr: []Value{}}, nil
	}
	for {
		p.skipWS()
		v, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		p.vals = append(p.vals, v)
		p.skipWS()
		if p.i >= len(p.s) {
			return Value{}, p.fail(ErrSyntax, "unexpected end of input in array, want ',' or ']'")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			arr := make([]Value, len(p.vals)-base)
			copy(arr, p.vals[base:])
			clear(p.vals[base:])
			p.vals = p.vals[:base]
			return Value{Kind: Array, Arr: arr}, nil
		default:
			return Value{}, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s in array, want ',' or ']'", p.describe()))
		}
	}
}

// refSmallObject is the member count up to which duplicate keys are found by
// linear search; larger objects use a map.
const refSmallObject = 16

func (p *refParser) object(depth int) (Value, error) {
	if err := p.enter(depth); err != nil {
		return Value{}, err
	}
	p.i++ // '{'
	base := len(p.mems)
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return Value{Kind: Object, Obj: []Member{}}, nil
	}
	var seen map[string]struct{}
	for {
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return Value{}, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s in object, want a string key", p.describe()))
		}
		keyAt := p.i
		k, err := p.str()
		if err != nil {
			return Value{}, err
		}
		// Duplicate keys make the canonical form depend on which member a
		// reader keeps; reject them rather than guess.
		n := len(p.mems) - base
		switch {
		case n < refSmallObject:
			for _, m := range p.mems[base:] {
				if m.Key == k {
					return Value{}, p.failAt(keyAt, ErrDuplicateKey, fmt.Sprintf("duplicate key %q", k))
				}
			}
		default:
			if seen == nil {
				seen = make(map[string]struct{}, 2*n)
				for _, m := range p.mems[base:] {
					seen[m.Key] = struct{}{}
				}
			}
			if _, dup := seen[k]; dup {
				return Value{}, p.failAt(keyAt, ErrDuplicateKey, fmt.Sprintf("duplicate key %q", k))
			}
			seen[k] = struct{}{}
		}
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return Value{}, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s after object key, want ':'", p.describe()))
		}
		p.i++
		p.skipWS()
		v, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		p.mems = append(p.mems, Member{Key: k, Value: v})
		p.skipWS()
		if p.i >= len(p.s) {
			return Value{}, p.fail(ErrSyntax, "unexpected end of input in object, want ',' or '}'")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			obj := make([]Member, len(p.mems)-base)
			copy(obj, p.mems[base:])
			clear(p.mems[base:])
			p.mems = p.mems[:base]
			return Value{Kind: Object, Obj: obj}, nil
		default:
			return Value{}, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s in object, want ',' or '}'", p.describe()))
		}
	}
}

// number scans an RFC 8259 number and returns its literal:
// -? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?
func (p *refParser) number() (string, error) {
	n, detail := scanNumber(p.s[p.i:])
	if detail != "" {
		p.i += n
		return "", p.fail(ErrSyntax, detail)
	}
	lit := p.s[p.i : p.i+n]
	p.i += n
	return lit, nil
}

// scanNumber returns the length of the RFC 8259 number at the start of s, or
// the offset and description of the first violation.
func (p *refParser) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: plain ASCII without escapes.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		p.i++
	}
	// Slow path: validate UTF-8; once an escape appears, decode into p.buf.
	escaped := false
	for {
		if p.i >= len(p.s) {
			return "", p.failAt(start-1, ErrSyntax, "unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			if !escaped {
				return p.s[start : p.i-1], nil
			}
			return string(p.buf), nil
		case c == '\\':
			if !escaped {
				escaped = true
				p.buf = append(p.buf[:0], p.s[start:p.i]...)
			}
			if err := p.escape(); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", p.fail(ErrSyntax, fmt.Sprintf("raw control character 0x%02x in string (escape it)", c))
		case c < 0x80:
			if escaped {
				p.buf = append(p.buf, c)
			}
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.fail(ErrInvalidUTF8, fmt.Sprintf("invalid UTF-8 byte 0x%02x in string", c))
			}
			if escaped {
				p.buf = append(p.buf, p.s[p.i:p.i+size]...)
			}
			p.i += size
		}
	}
}

// escape decodes one backslash escape at the cursor into p.buf.
func (p *refParser) escape() error {
	at := p.i
	if p.i+1 >= len(p.s) {
		return p.fail(ErrSyntax, "unterminated escape")
	}
	c := p.s[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		p.buf = append(p.buf, c)
	case 'b':
		p.buf = append(p.buf, '\b')
	case 'f':
		p.buf = append(p.buf, '\f')
	case 'n':
		p.buf = append(p.buf, '\n')
	case 'r':
		p.buf = append(p.buf, '\r')
	case 't':
		p.buf = append(p.buf, '\t')
	case 'u':
		r, ok := hex4(p.s[p.i:])
		if !ok {
			return p.failAt(at, ErrSyntax, "invalid \\u escape, want 4 hex digits")
		}
		p.i += 4
		if r >= 0xD800 && r < 0xDC00 {
			// A high surrogate combines with an immediately following
			// escaped low surrogate; otherwise it stays lone.
			if len(p.s)-p.i >= 6 && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
				if lo, ok := hex4(p.s[p.i+2:]); ok && lo >= 0xDC00 && lo < 0xE000 {
					p.i += 6
					p.buf = utf8.AppendRune(p.buf, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
					return nil
				}
			}
		}
		p.buf = appendWTF8(p.buf, r)
	default:
		return p.failAt(at, ErrSyntax, fmt.Sprintf("invalid escape \\%c", c))
	}
	return nil
}

// FuzzParseMatchesReference: the two-pass reader accepts exactly what the
// one-pass reference reader accepts, fails with the same kind, offset and
// message, and builds the identical tree (member order, literals, empty
// containers as non-nil empty slices), at any depth limit.
func FuzzParseMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"b":[1,2.5,-0,"x"],"a":{"\u00e9":null}}`, `"\ud800"`, `[1e400]`, `{"a":1,"a":2}`,
		`{"x":{"a":1,"b":{"a":1},"a":3}}`, `{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"\u0061":1,"\u0061":2}`,
		`[[],{},[[]],{"":{}}]`, `"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"`, "\"caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x94\x92\"",
		"\"\xed\xa0\x80\"", `"abc`, `"\u12"`, `[1 2]`, `{"a" 1}`, `01`, `-`, `1e+`, "\xef\xbb\xbf{}", `[1,]`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k\u0031":1}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k\u0031\u0036":16,"k16":1}`,
		`[[[[[[1]]]]]]`, `{"a":{"b":{"c":{"d":{}}}}}`,
	} {
		f.Add([]byte(s), uint8(4))
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint8) {
		opts := &ParseOptions{MaxDepth: int(depth%8) + 1}
		if depth >= 128 {
			opts = nil
		}
		got, err := ParseWith(data, opts)
		want, wantErr := refParseWith(data, opts)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("ParseWith(%q) error %v, reference %v", data, err, wantErr)
		}
		if err != nil {
			pe, ok := err.(*ParseError)
			if !ok {
				t.Fatalf("error %v is %T, want *ParseError", err, err)
			}
			we := wantErr.(*ParseError)
			if pe.Offset != we.Offset || pe.Err != we.Err || pe.Detail != we.Detail {
				t.Fatalf("ParseWith(%q) = %v (offset %d), reference %v (offset %d)", data, err, pe.Offset, wantErr, we.Offset)
			}
			return
		}
		if diff := cmp.Diff(want, got); diff != "" || !identical(want, got) {
			t.Fatalf("ParseWith(%q) tree differs from the reference (-ref +got):\n%s", data, diff)
		}
	})
}

// BenchmarkParseVsReference alternates blocks of 16 calls of the one-pass
// reference reader (the reader before the two-pass rewrite) and of Parse
// over the same documents, and reports the median per-call time of each
// (ref_ns, parse_ns) and their ratio (x_ref). On a shared, loaded machine
// the load then falls on both alike.
func BenchmarkParseVsReference(b *testing.B) {
	obj, err := os.ReadFile("../fingerprint/testdata/bench/object.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		doc  []byte
	}{{"evidence-2KB", sampleDoc}, {"fingerprint-object-1.6KB", obj}} {
		b.Run(c.name, func(b *testing.B) {
			ref, cand := interleave.Medians(b,
				func() { refParseWith(c.doc, nil) },
				func() { Parse(c.doc) })
			b.ReportMetric(ref, "ref_ns")
			b.ReportMetric(cand, "parse_ns")
			b.ReportMetric(cand/ref, "x_ref")
		})
	}
}
