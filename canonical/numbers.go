package canonical

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// pyMaxIntDigits is CPython's default limit on decimal digits in an int
// conversion (sys.int_info.default_max_str_digits): json.loads rejects a
// longer integer literal, so no Python reference can have signed one.
const pyMaxIntDigits = 4300

// maxSafeInteger is 2^53-1, the largest integer every IEEE double reader
// keeps exactly.
const maxSafeInteger = "9007199254740991"

func (e *encoder) number(b []byte, lit string) ([]byte, error) {
	if !validNumber(lit) {
		return b, fmt.Errorf("%w: %q", ErrInvalidNumber, lit)
	}
	isInt := isInteger(lit)
	switch e.st.numbers {
	case numPyIntOnly, numPyRepr:
		if isInt {
			return appendPyInt(b, lit)
		}
		if e.st.numbers == numPyIntOnly {
			return b, fmt.Errorf("%w: %s (write fractional values as strings or scaled integers)", ErrFloat, lit)
		}
		f, err := parseDouble(lit)
		if err != nil {
			return b, err
		}
		return appendPyRepr(b, f), nil
	case numESIntOnly:
		if !isInt {
			return b, fmt.Errorf("%w: %s (write fractional values as strings or scaled integers)", ErrFloat, lit)
		}
		digits := strings.TrimPrefix(lit, "-")
		if len(digits) > len(maxSafeInteger) || (len(digits) == len(maxSafeInteger) && digits > maxSafeInteger) {
			return b, fmt.Errorf("%w: %s is beyond ±(2^53−1), where IEEE double readers lose digits", ErrNumberRange, lit)
		}
		if digits == "0" {
			return append(b, '0'), nil
		}
		return append(b, lit...), nil
	default: // numES
		if out, ok := appendShortInteger(b, lit); ok {
			return out, nil
		}
		f, err := parseDouble(lit)
		if err != nil {
			return b, err
		}
		return appendES(b, f), nil
	}
}

// isInteger reports whether the valid number literal lit is an integer
// literal: one with neither a fraction nor an exponent.
func isInteger(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// appendShortInteger appends the valid number literal lit as
// Number::toString writes its double, when lit is an integer of at most 15
// digits: such an integer is exactly a double (it is below 2^53), written
// digit for digit, -0 as 0. ok is false for any other literal.
func appendShortInteger(b []byte, lit string) (out []byte, ok bool) {
	digits := strings.TrimPrefix(lit, "-")
	if len(digits) > 15 || !isInteger(digits) {
		return b, false
	}
	if digits == "0" {
		return append(b, '0'), true
	}
	return append(b, lit...), true
}

// appendPyInt writes an integer literal the way Python's int.__repr__ does:
// exactly, with "-0" as "0". The literal has already been validated, so it
// has no leading zeros.
func appendPyInt(b []byte, lit string) ([]byte, error) {
	digits := strings.TrimPrefix(lit, "-")
	if len(digits) > pyMaxIntDigits {
		return b, fmt.Errorf("%w: integer has %d digits; Python's json accepts at most %d", ErrNumberRange, len(digits), pyMaxIntDigits)
	}
	if digits == "0" {
		return append(b, '0'), nil
	}
	return append(b, lit...), nil
}

// parseDouble converts a valid JSON number literal to the nearest IEEE
// double, as Python's float() and JavaScript's Number() do. Literals too
// large for a double are ErrNumberRange (Python would write "Infinity",
// which is not JSON); literals too small become ±0, as in both references.
func parseDouble(lit string) (float64, error) {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%w: %s overflows an IEEE double", ErrNumberRange, lit)
	}
	return f, nil
}

// appendPyRepr writes f as Python's repr(float) does: the shortest digits
// that round-trip, in fixed notation (with at least one fractional digit)
// when the decimal exponent e of the first digit is in -4 <= e < 16, and
// otherwise as d[.ddd]e±XX with at least two exponent digits.
func appendPyRepr(b []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // [-]d[.ddd]e±dd[d]
	exp := decimalExponent(s)
	if exp < -4 || exp >= 16 {
		// Go's 'e' format already matches repr here: sign always present,
		// at least two exponent digits.
		return append(b, s...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'f', -1, 64)
	if bytes.IndexByte(b[start:], '.') < 0 {
		b = append(b, '.', '0')
	}
	return b
}

// decimalExponent returns the exponent of a strconv 'e' formatted number.
func decimalExponent(s []byte) int {
	i := len(s) - 1
	for s[i] != 'e' {
		i--
	}
	return atoiExp(s[i+1:])
}

// atoiExp parses a strconv exponent: a sign and decimal digits.
func atoiExp(s []byte) int {
	neg := s[0] == '-'
	n := 0
	for _, c := range s[1:] {
		n = n*10 + int(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

// appendES writes f as ECMAScript's Number.prototype.toString does (ECMA-262
// Number::toString, RFC 8785 §3.2.2.3): with s the shortest round-trip
// digits (k of them) and n the position of the decimal point,
//
//	k <= n <= 21   digits followed by n-k zeros       1e20 → 100000000000000000000
//	0 < n <= 21    digits with a point inserted         1.5
//	-6 < n <= 0    "0." then -n zeros then the digits  0.000001
//	otherwise      d[.ddd]e±(n-1)                       1e+21, 1e-7
//
// and -0 written as 0.
func appendES(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0')
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	ePos := 0
	for s[ePos] != 'e' {
		ePos++
	}
	exp := atoiExp(s[ePos+1:])
	// Digits without the point.
	var dbuf [24]byte
	digits := append(dbuf[:0], s[0])
	if ePos > 1 {
		digits = append(digits, s[2:ePos]...)
	}
	return appendESDigits(b, digits, exp+1)
}

// appendESDigits writes the non-negative number 0.digits × 10^n (digits
// without leading or trailing zeros) as Number::toString places its
// decimal point; see appendES.
func appendESDigits(b []byte, digits []byte, n int) []byte {
	k := len(digits)
	switch {
	case k <= n && n <= 21:
		b = append(b, digits...)
		for range n - k {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, digits[:n]...)
		b = append(b, '.')
		b = append(b, digits[n:]...)
	case -6 < n && n <= 0:
		b = append(b, '0', '.')
		for range -n {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}
