package canonical

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Default limits applied by Parse and by ParseWith when an option is zero.
const (
	// DefaultMaxDepth is the deepest nesting of arrays and objects Parse
	// accepts. Python's json module, the reference of three profiles, gives up
	// at about the same depth (its recursion limit).
	DefaultMaxDepth = 1000
	// DefaultMaxBytes is the largest input Parse accepts (16 MiB).
	DefaultMaxBytes = 16 << 20
)

// ParseOptions bounds what Parse accepts. A nil *ParseOptions, and any field
// left zero or negative, means the default.
type ParseOptions struct {
	// MaxDepth is the deepest nesting of arrays and objects accepted: "1" has
	// depth 0, "[1]" depth 1, "[{}]" depth 2. Default DefaultMaxDepth.
	MaxDepth int
	// MaxBytes is the largest input accepted, in bytes. Default
	// DefaultMaxBytes.
	MaxBytes int
}

func (o *ParseOptions) maxDepth() int {
	if o == nil || o.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return o.MaxDepth
}

func (o *ParseOptions) maxBytes() int {
	if o == nil || o.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return o.MaxBytes
}

// The kinds of parse failure. A *ParseError wraps exactly one of them, so
// callers can test with errors.Is(err, canonical.ErrDuplicateKey).
var (
	ErrSyntax       = errors.New("invalid JSON")
	ErrDuplicateKey = errors.New("duplicate key")
	ErrInvalidUTF8  = errors.New("invalid UTF-8")
	ErrTooDeep      = errors.New("nesting too deep")
	ErrTooLarge     = errors.New("input too large")
)

// ParseError reports where and why Parse rejected its input.
type ParseError struct {
	// Offset is the byte offset in the input at which the problem was found.
	Offset int
	// Err is one of ErrSyntax, ErrDuplicateKey, ErrInvalidUTF8, ErrTooDeep or
	// ErrTooLarge.
	Err error
	// Detail says what was found, e.g. `duplicate key "x"`.
	Detail string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("json: at byte %d: %s", e.Offset, e.Detail)
}

// Unwrap returns the kind of failure.
func (e *ParseError) Unwrap() error { return e.Err }

// Parse reads one JSON text (RFC 8259) into an ordered tree with the default
// limits. See ParseWith.
func Parse(data []byte) (Value, error) { return ParseWith(data, nil) }

// ParseWith reads exactly one JSON text (RFC 8259), surrounded by optional
// whitespace, into an ordered tree.
//
// It is strict where canonical forms need it to be: object members keep
// their input order and duplicate keys (compared after unescaping) are an
// error; numbers must match the RFC 8259 grammar and keep their literal
// exactly; strings must be valid UTF-8 without raw control characters; a
// byte-order mark, trailing data, and anything deeper or larger than opts
// allows are errors. Escaped lone UTF-16 surrogates ("\ud800") are accepted
// and held as WTF-8 (see Value). Errors are *ParseError values.
func ParseWith(data []byte, opts *ParseOptions) (Value, error) {
	if len(data) > opts.maxBytes() {
		return Value{}, &ParseError{Offset: opts.maxBytes(), Err: ErrTooLarge,
			Detail: fmt.Sprintf("input is %d bytes, limit is %d", len(data), opts.maxBytes())}
	}
	// One conversion for the whole input: unescaped strings and number
	// literals become substrings of it, without further allocation.
	p := parser{s: string(data), maxDepth: opts.maxDepth()}
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

type parser struct {
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

func (p *parser) fail(kind error, detail string) error {
	return &ParseError{Offset: p.i, Err: kind, Detail: detail}
}

func (p *parser) failAt(off int, kind error, detail string) error {
	return &ParseError{Offset: off, Err: kind, Detail: detail}
}

// describe names the byte at the cursor for error messages.
func (p *parser) describe() string {
	if p.i >= len(p.s) {
		return "end of input"
	}
	c := p.s[p.i]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) skipWS() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
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

func (p *parser) literal(word string) error {
	if len(p.s)-p.i >= len(word) && p.s[p.i:p.i+len(word)] == word {
		p.i += len(word)
		return nil
	}
	return p.fail(ErrSyntax, fmt.Sprintf("invalid literal, want %q", word))
}

func (p *parser) enter(depth int) error {
	if depth > p.maxDepth {
		return p.fail(ErrTooDeep, fmt.Sprintf("nesting deeper than %d", p.maxDepth))
	}
	return nil
}

func (p *parser) array(depth int) (Value, error) {
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

// smallObject is the member count up to which duplicate keys are found by
// linear search; larger objects use a map.
const smallObject = 16

func (p *parser) object(depth int) (Value, error) {
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
		case n < smallObject:
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
func (p *parser) number() (string, error) {
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
func scanNumber(s string) (int, string) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
		if i < len(s) && s[i] >= '0' && s[i] <= '9' {
			return i, "invalid number: leading zero"
		}
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return i, "invalid number: want a digit"
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return i, "invalid number: want a digit after '.'"
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return i, "invalid number: want a digit in the exponent"
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i, ""
}

// validNumber reports whether lit is exactly one RFC 8259 number.
func validNumber(lit string) bool {
	n, detail := scanNumber(lit)
	return detail == "" && n == len(lit)
}

// str scans a string starting at the opening quote and returns its decoded
// text. Strings without escapes are returned as substrings of the input.
func (p *parser) str() (string, error) {
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
func (p *parser) escape() error {
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

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for i := range 4 {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
