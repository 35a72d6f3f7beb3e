package canonical

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Profile is one canonical JSON form. AppendCanonical appends the canonical
// bytes of v to dst and returns the extended slice; on error the returned
// slice holds dst plus whatever was written before the problem was found and
// must not be used.
type Profile interface {
	// Name is the profile's registered name, e.g. "chp-stable-v1".
	Name() string
	AppendCanonical(dst []byte, v Value) ([]byte, error)
}

// Errors returned by profiles for values their reference rejects or cannot
// represent. They are wrapped with the JSON path of the offending value.
var (
	// ErrFloat: the profile allows only integers (CHP rule 6: no non-integer
	// numbers in canonicalized content).
	ErrFloat = errors.New("non-integer number not allowed")
	// ErrNumberRange: the number has no representation in the profile
	// (overflows an IEEE double, has more digits than Python accepts, or is
	// an integer beyond 2^53 where the references disagree).
	ErrNumberRange = errors.New("number out of range")
	// ErrInvalidNumber: a Number value whose literal is not RFC 8259 JSON
	// (only possible in a hand-built tree).
	ErrInvalidNumber = errors.New("invalid number literal")
	// ErrLoneSurrogate: the string holds a lone UTF-16 surrogate, which the
	// profile's UTF-8 output cannot carry.
	ErrLoneSurrogate = errors.New("lone surrogate")
	// ErrInvalidKind: a Value with an unknown Kind.
	ErrInvalidKind = errors.New("invalid value kind")
)

var (
	registryMu sync.RWMutex
	registry   = map[string]Profile{}
)

// Register makes p available to ProfileByName under p.Name() and each alias.
// Profiles register themselves from init functions; registering a name twice
// panics, since two profiles answering to one name would make signatures
// depend on init order.
func Register(p Profile, aliases ...string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, name := range append([]string{p.Name()}, aliases...) {
		if _, dup := registry[name]; dup {
			panic(fmt.Sprintf("canonical: profile %q registered twice", name))
		}
		registry[name] = p
	}
}

// ProfileByName returns the profile registered under name (a profile name or
// alias such as "chp-stable-v1", "jcs", "chp-jcs-v1", "genesis",
// "khoralabs").
func ProfileByName(name string) (Profile, error) {
	registryMu.RLock()
	p, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("canonical: unknown profile %q (known: %s)", name, strings.Join(ProfileNames(), ", "))
	}
	return p, nil
}

// ProfileNames lists every registered name and alias, sorted.
func ProfileNames() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// bufPool recycles output buffers for the hashing helpers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Canonicalize parses one JSON text with the default limits and returns its
// canonical form under p.
func Canonicalize(p Profile, data []byte) ([]byte, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return p.AppendCanonical(nil, v)
}

// HashValue returns the SHA-256 digest of the canonical form of v under p.
// It writes into pooled buffers and does not allocate: it is the call for
// hot paths such as CHP evidence hashing.
func HashValue(p Profile, v Value) ([32]byte, error) {
	bp := bufPool.Get().(*[]byte)
	out, err := p.AppendCanonical((*bp)[:0], v)
	var sum [32]byte
	if err == nil {
		sum = sha256.Sum256(out)
	}
	if cap(out) <= 1<<20 { // do not pin huge buffers in the pool
		*bp = out[:0]
		bufPool.Put(bp)
	}
	return sum, err
}

// pathError attaches the JSON path of the offending value to a profile error.
type pathError struct {
	profile string
	path    []string // innermost first
	err     error
}

func (e *pathError) Error() string {
	var b strings.Builder
	b.WriteString("$")
	for i := len(e.path) - 1; i >= 0; i-- {
		b.WriteString(e.path[i])
	}
	return fmt.Sprintf("canonical %s: at %s: %v", e.profile, b.String(), e.err)
}

func (e *pathError) Unwrap() error { return e.err }

func keyStep(k string) string { return "[" + quoteForPath(k) + "]" }

func indexStep(i int) string { return fmt.Sprintf("[%d]", i) }

// quoteForPath quotes a key for an error message, showing invalid bytes as
// U+FFFD.
func quoteForPath(k string) string {
	clean := make([]byte, 0, len(k))
	for i := 0; i < len(k); {
		r, size := decodeWTF8(k[i:])
		if size == 0 {
			r, size = utf8.RuneError, 1
		}
		clean = appendWTF8(clean, r)
		i += size
	}
	b, _ := appendWTF8String(nil, string(clean))
	return string(b)
}
