package canonical

// AppendJSString appends s as JSON.stringify writes a string: \" \\ \b \t
// \n \f \r, other C0 controls as lowercase \u00xx, lone surrogates (held
// in WTF-8, see Value) as lowercase \udxxx, and everything else raw —
// DEL, U+2028/U+2029, '<', '>', '&' and all non-ASCII. Invalid UTF-8 is
// ErrInvalidUTF8. It is the form Value.AppendJSON writes a string in.
func AppendJSString(b []byte, s string) ([]byte, error) { return appendWTF8String(b, s) }
