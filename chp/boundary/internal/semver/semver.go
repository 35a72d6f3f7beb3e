// Package semver parses semantic versions and the version ranges a CHP
// envelope's requested_capability_version names, and orders versions by
// semver precedence.
package semver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Capability-version ranges (chp-v0.2.md §1, proposal 0028): an envelope's
// requested_capability_version is a semver range — "1.0.0" exact, "^1.2",
// "~1.2.3", ">=1.0 <2", "1.x", terms separated by spaces all holding.
// Partial versions and x-ranges follow the npm semantics the proposal cites;
// a pre-release version satisfies a range only when a term names a
// pre-release of the same major.minor.patch.

// Version is a parsed semantic version.
type Version struct {
	major, minor, patch uint64
	pre                 []string // dot-separated pre-release identifiers; nil = release
}

// maxRangeLen bounds a range string: a longer one is refused unread.
const maxRangeLen = 256

var errBadVersion = errors.New("not a semantic version")

// Parse parses MAJOR.MINOR.PATCH[-PRE][+BUILD] (a leading "v" or "="
// is allowed, as registries write it).
func Parse(s string) (Version, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "="), "v")
	v, n, err := parsePartial(s)
	if err != nil {
		return Version{}, err
	}
	if n != 3 {
		return Version{}, fmt.Errorf("%w: %q needs major.minor.patch", errBadVersion, s)
	}
	return v, nil
}

// parsePartial parses a possibly partial version ("1", "1.2", "1.2.3-rc.1",
// with x/X/* wildcards ending it) and returns how many numeric parts it
// names (0–3).
func parsePartial(s string) (Version, int, error) {
	var v Version
	if s == "" {
		return v, 0, fmt.Errorf("%w: empty", errBadVersion)
	}
	core, build, _ := strings.Cut(s, "+")
	if build != "" && !validIdents(build, false) {
		return v, 0, fmt.Errorf("%w: build metadata %q", errBadVersion, build)
	}
	core, pre, hasPre := strings.Cut(core, "-")
	if hasPre {
		if !validIdents(pre, true) {
			return v, 0, fmt.Errorf("%w: pre-release %q", errBadVersion, pre)
		}
		v.pre = strings.Split(pre, ".")
	}
	parts := strings.Split(core, ".")
	if len(parts) > 3 {
		return v, 0, fmt.Errorf("%w: %q has more than three parts", errBadVersion, s)
	}
	dst := []*uint64{&v.major, &v.minor, &v.patch}
	n := 0
	for i, p := range parts {
		if p == "x" || p == "X" || p == "*" {
			for _, rest := range parts[i+1:] {
				if rest != "x" && rest != "X" && rest != "*" {
					return v, 0, fmt.Errorf("%w: %q: a number after a wildcard", errBadVersion, s)
				}
			}
			break
		}
		num, err := parseNumber(p)
		if err != nil {
			return v, 0, fmt.Errorf("%w: %q: %v", errBadVersion, s, err)
		}
		*dst[i] = num
		n++
	}
	if hasPre && n != 3 {
		return v, 0, fmt.Errorf("%w: %q: a pre-release needs major.minor.patch", errBadVersion, s)
	}
	return v, n, nil
}

// parseNumber parses a numeric identifier: digits, no leading zero.
func parseNumber(p string) (uint64, error) {
	if p == "" || len(p) > 1 && p[0] == '0' {
		return 0, fmt.Errorf("numeric part %q", p)
	}
	for _, c := range []byte(p) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("numeric part %q", p)
		}
	}
	return strconv.ParseUint(p, 10, 64)
}

// validIdents reports whether s is dot-separated non-empty [0-9A-Za-z-]
// identifiers; numeric pre-release identifiers may not have leading zeros.
func validIdents(s string, pre bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		numeric := true
		for _, c := range []byte(id) {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			default:
				return false
			}
		}
		if pre && numeric && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

// Compare orders versions by semver precedence, build metadata ignored:
// -1, 0 or +1.
func (a Version) Compare(b Version) int {
	for _, d := range [][2]uint64{{a.major, b.major}, {a.minor, b.minor}, {a.patch, b.patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case a.pre == nil && b.pre == nil:
		return 0
	case a.pre == nil:
		return 1
	case b.pre == nil:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		if c := compareIdent(a.pre[i], b.pre[i]); c != 0 {
			return c
		}
	}
	return cmpInt(len(a.pre), len(b.pre))
}

func compareIdent(a, b string) int {
	an, aErr := strconv.ParseUint(a, 10, 64)
	bn, bErr := strconv.ParseUint(b, 10, 64)
	switch {
	case aErr == nil && bErr == nil:
		if an != bn {
			if an < bn {
				return -1
			}
			return 1
		}
		return 0
	case aErr == nil:
		return -1 // numeric identifiers sort before alphanumeric ones
	case bErr == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// comparator is one bound: op is "<", "<=", ">", ">=" or "=".
type comparator struct {
	op string
	v  Version
}

func (c comparator) holds(v Version) bool {
	d := v.Compare(c.v)
	switch c.op {
	case "<":
		return d < 0
	case "<=":
		return d <= 0
	case ">":
		return d > 0
	case ">=":
		return d >= 0
	}
	return d == 0
}

// Range is a conjunction of comparators (empty: any release).
type Range []comparator

// ParseRange parses a requested_capability_version.
func ParseRange(s string) (Range, error) {
	if len(s) > maxRangeLen {
		return nil, fmt.Errorf("range longer than %d bytes", maxRangeLen)
	}
	terms := strings.Fields(s)
	if len(terms) == 0 {
		return nil, errors.New("empty range")
	}
	var r Range
	for i := 0; i < len(terms); i++ {
		t := terms[i]
		// An operator written apart from its version (">= 1.0").
		if isOperator(t) && i+1 < len(terms) {
			i++
			t += terms[i]
		}
		cs, err := parseTerm(t)
		if err != nil {
			return nil, fmt.Errorf("term %q: %w", t, err)
		}
		r = append(r, cs...)
	}
	return r, nil
}

func isOperator(t string) bool {
	switch t {
	case "<", "<=", ">", ">=", "=", "^", "~":
		return true
	}
	return false
}

// parseTerm turns one term into comparators.
func parseTerm(t string) ([]comparator, error) {
	if t == "*" || t == "x" || t == "X" {
		return nil, nil
	}
	var op string
	for _, o := range []string{"<=", ">=", "<", ">", "=", "^", "~"} {
		if strings.HasPrefix(t, o) {
			op, t = o, t[len(o):]
			break
		}
	}
	t = strings.TrimPrefix(t, "v")
	v, n, err := parsePartial(t)
	if err != nil {
		return nil, err
	}
	lo := v // the partial version, missing parts zero
	switch op {
	case "", "=":
		if n == 3 {
			return []comparator{{"=", v}}, nil
		}
		return xRange(v, n), nil
	case "^":
		var hi Version
		switch {
		case n == 0:
			return nil, nil
		case v.major > 0 || n == 1:
			hi = Version{major: v.major + 1}
		case v.minor > 0 || n == 2:
			hi = Version{minor: v.minor + 1}
		default:
			hi = Version{patch: v.patch + 1}
		}
		return []comparator{{">=", lo}, {"<", hi}}, nil
	case "~":
		if n == 0 {
			return nil, nil
		}
		hi := Version{major: v.major, minor: v.minor + 1}
		if n == 1 {
			hi = Version{major: v.major + 1}
		}
		return []comparator{{">=", lo}, {"<", hi}}, nil
	case ">=", "<":
		if n == 0 {
			if op == "<" {
				return []comparator{{"<", Version{pre: []string{"0"}}}}, nil // nothing
			}
			return nil, nil
		}
		return []comparator{{op, lo}}, nil
	case ">":
		if n == 0 {
			return []comparator{{"<", Version{pre: []string{"0"}}}}, nil // nothing
		}
		if n == 3 {
			return []comparator{{">", v}}, nil
		}
		return []comparator{{">=", bump(v, n)}}, nil
	default: // "<="
		if n == 0 {
			return nil, nil
		}
		if n == 3 {
			return []comparator{{"<=", v}}, nil
		}
		return []comparator{{"<", bump(v, n)}}, nil
	}
}

// xRange is the range a partial version names: 1 → >=1.0.0 <2.0.0,
// 1.2 → >=1.2.0 <1.3.0, nothing → any.
func xRange(v Version, n int) []comparator {
	if n == 0 {
		return nil
	}
	return []comparator{{">=", Version{major: v.major, minor: v.minor}}, {"<", bump(v, n)}}
}

// bump returns the first version after every version the n-part partial v
// names.
func bump(v Version, n int) Version {
	if n == 1 {
		return Version{major: v.major + 1}
	}
	return Version{major: v.major, minor: v.minor + 1}
}

// SatisfiedBy reports whether v is in the range. A pre-release satisfies
// only a range that names a pre-release of the same major.minor.patch.
func (r Range) SatisfiedBy(v Version) bool {
	for _, c := range r {
		if !c.holds(v) {
			return false
		}
	}
	if v.pre == nil {
		return true
	}
	for _, c := range r {
		if c.v.pre != nil && c.v.major == v.major && c.v.minor == v.minor && c.v.patch == v.patch {
			return true
		}
	}
	return false
}
