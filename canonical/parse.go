package canonical

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
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

// Error describes the failure and the byte offset where it was found.
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
//
// The tree shares memory with itself: every string without escapes and
// every number literal is a substring of one copy of data, and the
// elements of all arrays, and the members of all objects, each live in one
// backing array (with capacities cut, so appending to one container never
// writes into another). Holding any part of the tree therefore keeps the
// whole document's memory alive; copy what you keep from a large document
// (strings.Clone, or a fresh tree) if the rest is to be freed.
func ParseWith(data []byte, opts *ParseOptions) (Value, error) {
	if len(data) > opts.maxBytes() {
		return Value{}, &ParseError{Offset: opts.maxBytes(), Err: ErrTooLarge,
			Detail: fmt.Sprintf("input is %d bytes, limit is %d", len(data), opts.maxBytes())}
	}
	if uint64(len(data)) > maxInput {
		return Value{}, &ParseError{Offset: int(min(maxInput, uint64(math.MaxInt))), Err: ErrTooLarge,
			Detail: fmt.Sprintf("input is %d bytes, the reader's limit is %d", len(data), maxInput)}
	}
	p := parserPool.Get().(*parser)
	defer p.release()
	// One conversion for the whole input: strings without escapes and
	// number literals become substrings of it, without further allocation.
	p.s, p.i, p.maxDepth = string(data), 0, opts.maxDepth()
	p.skipWS()
	if len(p.s) >= 3 && p.s[0] == 0xEF && p.s[1] == 0xBB && p.s[2] == 0xBF {
		return Value{}, p.fail(ErrSyntax, "byte-order mark (U+FEFF) before the JSON text")
	}
	if err := p.scan(); err != nil {
		return Value{}, err
	}
	p.skipWS()
	if p.i < len(p.s) {
		return Value{}, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s after the JSON value", p.describe()))
	}
	return p.build(), nil
}

// The reader works in two passes. The first (parser.scan)
// validates the whole text and records it on a tape: one token per value
// and per object key, each container's token holding its number of
// children. The second (builder.fill) allocates every array element of the
// document in one []Value and every object member in one []Member, sized
// exactly from the counts, and fills them in place from the tape. A
// document therefore costs at most four allocations whatever its size: the
// copy of the input as a string (which every unescaped string and number
// literal is a substring of), the elements, the members, and one string
// holding the decoded text of all strings that had escapes. (Objects of
// more than smallObject members add a map for the duplicate check.)
//
// The price of sharing: any part of the tree — one string, one sub-array —
// keeps the whole input and the whole document's backing arrays alive.
// Callers that keep a small piece of a large document for long should
// copy it (strings.Clone, or govalue.FromGo of a copy).

// maxInput is the largest input the tape's 32-bit offsets can address.
const maxInput uint64 = math.MaxUint32 - 1

// Token kinds on the tape.
const (
	tNull uint8 = iota
	tFalse
	tTrue
	tNum    // literal p.s[a:b]
	tStr    // string p.s[a:b], no escapes
	tStrEsc // string p.esc[a:b], decoded
	tArr    // a elements follow
	tObj    // a members follow, each a key token then its value
)

// tok is one tape entry.
type tok struct {
	kind uint8
	a, b uint32
}

type parser struct {
	s        string
	i        int
	maxDepth int
	tape     []tok
	// keys holds the key tokens of the objects being read, for the
	// duplicate check; each object pops its own when it closes.
	keys  []tok
	stack []frame
	// esc collects the decoded bytes of every string that has escapes.
	esc []byte
	// nVals and nMems count array elements and object members.
	nVals, nMems int
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// release returns p to the pool without anything that refers to the
// caller's document, unless its buffers grew too large to keep.
func (p *parser) release() {
	p.s = ""
	clear(p.stack[:cap(p.stack)]) // maps of large objects
	if cap(p.tape) > 1<<16 || cap(p.esc) > 1<<20 || cap(p.keys) > 1<<12 || cap(p.stack) > 1<<12 {
		return
	}
	p.tape, p.keys, p.esc = p.tape[:0], p.keys[:0], p.esc[:0]
	p.nVals, p.nMems = 0, 0
	parserPool.Put(p)
}

func (p *parser) fail(kind error, detail string) error {
	return &ParseError{Offset: p.i, Err: kind, Detail: detail}
}

// failHere fails at offset i and leaves the cursor there, as scan's
// errors do. (A detail naming the byte at the cursor must be computed
// after p.i is set, so those errors set p.i themselves.)
func (p *parser) failHere(i int, kind error, detail string) error {
	p.i = i
	return p.fail(kind, detail)
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

// skipWS returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipWS(s string, i int) int {
	for i < len(s) {
		if c := s[i]; c > ' ' || (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
			return i
		}
		i++
	}
	return i
}

func (p *parser) skipWS() { p.i = skipWS(p.s, p.i) }

// frame is one container open during the scan.
type frame struct {
	at   int // index of its token on the tape
	n    int // children read so far
	keys int // where its keys start in p.keys (objects)
	obj  bool
	// bloom has a bit set for each key summary (keyBit) of the object's
	// keys so far: a key whose bit is clear is new without a search.
	bloom uint64
	seen  map[string]struct{} // an object's keys, once it has smallObject
}

// The states of the scan.
const (
	wantValue  = iota // a value must start here
	wantKey           // an object key must start here
	afterValue        // a value has ended
)

// scan reads one value at the cursor onto the tape, with an explicit stack
// of open containers instead of recursion. Its checks, their order, the
// offsets and the messages are those of a plain recursive-descent reader
// (FuzzParseMatchesReference holds it to one).
func (p *parser) scan() error {
	s := p.s
	i := p.i
	tape := p.tape
	stack := p.stack[:0]
	defer func() { p.tape, p.stack = tape, stack }()
	state := wantValue
	for {
		switch state {
		case wantValue:
			i = skipWS(s, i)
			if i >= len(s) {
				return p.failHere(i, ErrSyntax, "unexpected end of input, want a value")
			}
			switch c := s[i]; {
			case c == '"':
				t, next, err := p.str(i)
				if err != nil {
					return err
				}
				tape = append(tape, t)
				i = next
				state = afterValue
			case c == '{' || c == '[':
				if len(stack) >= p.maxDepth {
					return p.failHere(i, ErrTooDeep, fmt.Sprintf("nesting deeper than %d", p.maxDepth))
				}
				kind, end := tArr, byte(']')
				if c == '{' {
					kind, end = tObj, '}'
				}
				f := frame{at: len(tape), obj: c == '{', keys: len(p.keys)}
				tape = append(tape, tok{kind: kind})
				i = skipWS(s, i+1)
				if i < len(s) && s[i] == end {
					i++
					state = afterValue
					break
				}
				stack = append(stack, f)
				if f.obj {
					state = wantKey
				}
			case c == '-' || (c >= '0' && c <= '9'):
				n, detail := scanNumber(s[i:])
				if detail != "" {
					return p.failHere(i+n, ErrSyntax, detail)
				}
				tape = append(tape, tok{kind: tNum, a: uint32(i), b: uint32(i + n)})
				i += n
				state = afterValue
			case c == 't' || c == 'f' || c == 'n':
				word, kind := literal(c)
				if len(s)-i < len(word) || s[i:i+len(word)] != word {
					return p.failHere(i, ErrSyntax, fmt.Sprintf("invalid literal, want %q", word))
				}
				tape = append(tape, tok{kind: kind})
				i += len(word)
				state = afterValue
			default:
				p.i = i
				return p.fail(ErrSyntax, fmt.Sprintf("unexpected %s, want a value", p.describe()))
			}

		case afterValue:
			if len(stack) == 0 {
				p.i = i
				return nil
			}
			f := &stack[len(stack)-1]
			f.n++
			i = skipWS(s, i)
			if i >= len(s) {
				return p.afterValueErr(i, f.obj)
			}
			switch c := s[i]; {
			case c == ',':
				i++
				state = wantValue
				if f.obj {
					state = wantKey
				}
			case c == '}' && f.obj, c == ']' && !f.obj:
				i++
				p.close(f, tape)
				stack = stack[:len(stack)-1]
			default:
				return p.afterValueErr(i, f.obj)
			}

		case wantKey:
			var err error
			if tape, i, err = p.key(&stack[len(stack)-1], tape, i); err != nil {
				return err
			}
			state = wantValue
		}
	}
}

// close ends the container f, whose opening token is on tape: it
// records the count of members or elements, and an object's keys are
// forgotten.
func (p *parser) close(f *frame, tape []tok) {
	tape[f.at].a = uint32(f.n)
	if f.obj {
		p.nMems += f.n
		p.keys = p.keys[:f.keys]
		f.seen = nil
		return
	}
	p.nVals += f.n
}

// literal returns the literal a value starting with c ('t', 'f' or 'n')
// must be, and its token kind.
func literal(c byte) (string, uint8) {
	switch c {
	case 't':
		return "true", tTrue
	case 'f':
		return "false", tFalse
	}
	return "null", tNull
}

// afterValueErr reports what follows a member or an element when it is
// neither a ',' nor the container's end (at i): the end of input or an
// unexpected byte.
func (p *parser) afterValueErr(i int, obj bool) error {
	p.i = i
	switch {
	case p.i >= len(p.s) && obj:
		return p.fail(ErrSyntax, "unexpected end of input in object, want ',' or '}'")
	case p.i >= len(p.s):
		return p.fail(ErrSyntax, "unexpected end of input in array, want ',' or ']'")
	case obj:
		return p.fail(ErrSyntax, fmt.Sprintf("unexpected %s in object, want ',' or '}'", p.describe()))
	}
	return p.fail(ErrSyntax, fmt.Sprintf("unexpected %s in array, want ',' or ']'", p.describe()))
}

// key reads an object's key and the ':' after it at i onto the tape, for
// scan; it returns the tape and the offset after the ':'.
func (p *parser) key(f *frame, tape []tok, i int) ([]tok, int, error) {
	s := p.s
	i = skipWS(s, i)
	if i >= len(s) || s[i] != '"' {
		p.i = i
		return tape, i, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s in object, want a string key", p.describe()))
	}
	keyAt := i
	k, next, err := p.str(i)
	if err != nil {
		return tape, i, err
	}
	i = next
	// Duplicate keys make the canonical form depend on which member a
	// reader keeps; reject them rather than guess.
	if err := p.checkKey(f, k, keyAt); err != nil {
		return tape, i, err
	}
	p.keys = append(p.keys, k)
	tape = append(tape, k)
	i = skipWS(s, i)
	if i >= len(s) || s[i] != ':' {
		p.i = i
		return tape, i, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s after object key, want ':'", p.describe()))
	}
	return tape, i + 1, nil
}

// smallObject is the member count up to which duplicate keys are found by
// linear search; larger objects use a map.
const smallObject = 16

// checkKey reports k, the key at offset keyAt, if the object f already has
// it.
func (p *parser) checkKey(f *frame, k tok, keyAt int) error {
	prev := p.keys[f.keys:]
	if len(prev) < smallObject {
		bit := p.keyBit(k)
		if f.bloom&bit == 0 {
			f.bloom |= bit
			return nil
		}
		n := k.b - k.a
		for _, o := range prev {
			if o.b-o.a == n && p.sameKey(o, k) {
				return p.failAt(keyAt, ErrDuplicateKey, fmt.Sprintf("duplicate key %q", p.keyString(k)))
			}
		}
		return nil
	}
	if f.seen == nil {
		f.seen = make(map[string]struct{}, 2*len(prev))
		for _, o := range prev {
			f.seen[p.keyString(o)] = struct{}{}
		}
	}
	ks := p.keyString(k)
	if _, dup := f.seen[ks]; dup {
		return p.failAt(keyAt, ErrDuplicateKey, fmt.Sprintf("duplicate key %q", ks))
	}
	f.seen[ks] = struct{}{}
	return nil
}

// keyBit summarizes a key's decoded text as one of 64 bits, from its
// length and last byte: equal keys have equal bits.
func (p *parser) keyBit(t tok) uint64 {
	n := t.b - t.a
	h := n * 7
	if n > 0 {
		if t.kind == tStrEsc {
			h += uint32(p.esc[t.b-1])
		} else {
			h += uint32(p.s[t.b-1])
		}
	}
	return 1 << (h & 63)
}

// keyString returns the decoded text of a string token (allocating only
// for one with escapes).
func (p *parser) keyString(t tok) string {
	if t.kind == tStrEsc {
		return string(p.esc[t.a:t.b])
	}
	return p.s[t.a:t.b]
}

// sameKey reports whether two string tokens decode to the same text,
// without allocating.
func (p *parser) sameKey(x, y tok) bool {
	if x.b-x.a != y.b-y.a {
		return false
	}
	switch {
	case x.kind == tStr && y.kind == tStr:
		return p.s[x.a:x.b] == p.s[y.a:y.b]
	case x.kind == tStr:
		return string(p.esc[y.a:y.b]) == p.s[x.a:x.b]
	case y.kind == tStr:
		return string(p.esc[x.a:x.b]) == p.s[y.a:y.b]
	}
	return string(p.esc[x.a:x.b]) == string(p.esc[y.a:y.b])
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

// strPlain marks the bytes a string may hold as they are: 0x20..0x7F
// except '"' and '\'. Control characters are errors, and bytes from 0x80
// start a UTF-8 sequence to validate.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = false, false
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// specialMask flags, in the high bit of each byte of w (eight string
// bytes, the first in the low byte), the bytes a string cannot hold as they
// are: '"', '\\', controls below 0x20, and every byte from 0x80. Bytes
// above a flagged one may be flagged too (a borrow), but the lowest flagged
// byte is always a special one: a borrow only starts at a byte below 0x20
// or at one equal to '"' or '\\'.
func specialMask(w uint64) uint64 {
	// XOR 0x02 keeps the controls below 0x20 and turns '"' (0x22) into
	// 0x20, so one subtraction of 0x21 borrows at exactly those bytes.
	ctlQuote := (w ^ (lsb * 0x02)) - lsb*0x21
	backslash := (w ^ (lsb * '\\')) - lsb
	return (ctlQuote | backslash | w) & msb
}

// str scans a string starting at the opening quote and returns its token:
// a span of the input when it has no escapes, else a span of p.esc holding
// its decoded text.
func (p *parser) str(open int) (t tok, next int, err error) {
	s := p.s
	i := open + 1
	start := i
	escaped := false
	escStart := 0
	run := start // in an escaped string: first byte not yet copied to p.esc
	for {
		// Eight bytes at a time while none is special; the lowest flagged
		// byte of a word is always a special one (see specialMask).
		for len(s)-i >= 8 {
			w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if m := specialMask(w); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto special
			}
			i += 8
		}
		for i < len(s) && strPlain[s[i]] {
			i++
		}
	special:
		if i >= len(s) {
			return tok{}, 0, p.failAt(open, ErrSyntax, "unterminated string")
		}
		switch c := s[i]; {
		case c == '"':
			if !escaped {
				return tok{kind: tStr, a: uint32(start), b: uint32(i)}, i + 1, nil
			}
			p.esc = append(p.esc, s[run:i]...)
			return tok{kind: tStrEsc, a: uint32(escStart), b: uint32(len(p.esc))}, i + 1, nil
		case c == '\\':
			if !escaped {
				escaped = true
				escStart = len(p.esc)
			}
			p.esc = append(p.esc, s[run:i]...)
			p.i = i
			if err := p.escape(); err != nil {
				return tok{}, 0, err
			}
			i = p.i
			run = i
		case c < 0x20:
			p.i = i
			return tok{}, 0, p.fail(ErrSyntax, fmt.Sprintf("raw control character 0x%02x in string (escape it)", c))
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size <= 1 {
				p.i = i
				return tok{}, 0, p.fail(ErrInvalidUTF8, fmt.Sprintf("invalid UTF-8 byte 0x%02x in string", c))
			}
			i += size
		}
	}
}

// escape decodes the backslash escape at the cursor into p.esc.
func (p *parser) escape() error {
	at := p.i
	if p.i+1 >= len(p.s) {
		return p.fail(ErrSyntax, "unterminated escape")
	}
	c := p.s[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		p.esc = append(p.esc, c)
	case 'b':
		p.esc = append(p.esc, '\b')
	case 'f':
		p.esc = append(p.esc, '\f')
	case 'n':
		p.esc = append(p.esc, '\n')
	case 'r':
		p.esc = append(p.esc, '\r')
	case 't':
		p.esc = append(p.esc, '\t')
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
					p.esc = utf8.AppendRune(p.esc, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
					return nil
				}
			}
		}
		p.esc = appendWTF8(p.esc, r)
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

// build makes the tree from the tape of a document that has been read
// without error.
func (p *parser) build() Value {
	// make of length 0 does not allocate, and gives empty containers the
	// non-nil empty slices they had before.
	b := builder{tape: p.tape, s: p.s, vals: make([]Value, p.nVals), mems: make([]Member, p.nMems)}
	if len(p.esc) > 0 {
		b.esc = string(p.esc)
	}
	var v Value
	b.fill(&v)
	return v
}

// builder fills a tree in place from a tape.
type builder struct {
	tape []tok
	t    int
	s    string
	esc  string
	vals []Value  // not yet handed out
	mems []Member // not yet handed out
}

// fill writes the value at the tape cursor into *v, which is zero.
func (b *builder) fill(v *Value) {
	t := b.tape[b.t]
	b.t++
	switch t.kind {
	case tNull:
	case tFalse:
		v.Kind = Bool
	case tTrue:
		v.Kind, v.Bool = Bool, true
	case tNum:
		v.Kind, v.Str = Number, b.s[t.a:t.b]
	case tStr:
		v.Kind, v.Str = String, b.s[t.a:t.b]
	case tStrEsc:
		v.Kind, v.Str = String, b.esc[t.a:t.b]
	case tArr:
		// Each container gets exactly its span of the shared array, with
		// its capacity cut so that an append cannot overwrite a neighbour.
		n := int(t.a)
		arr := b.vals[:n:n]
		b.vals = b.vals[n:]
		v.Kind, v.Arr = Array, arr
		for i := range arr {
			b.fill(&arr[i])
		}
	case tObj:
		n := int(t.a)
		obj := b.mems[:n:n]
		b.mems = b.mems[n:]
		v.Kind, v.Obj = Object, obj
		for i := range obj {
			k := b.tape[b.t]
			b.t++
			if k.kind == tStrEsc {
				obj[i].Key = b.esc[k.a:k.b]
			} else {
				obj[i].Key = b.s[k.a:k.b]
			}
			b.fill(&obj[i].Value)
		}
	}
}
