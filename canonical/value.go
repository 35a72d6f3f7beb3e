package canonical

// Kind is the JSON type of a Value.
type Kind uint8

// The six JSON kinds.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// Value is one node of an ordered JSON tree, as read by Parse: object members
// stay in input order and numbers keep the exact literal that was written, so
// that each canonicalization profile can apply its own number and ordering
// rules without losing information to float64 or to Go's map iteration.
//
// Strings are decoded. A string may contain lone UTF-16 surrogates (which
// JSON text can express as "\ud800" but UTF-8 cannot); they are held in
// WTF-8, i.e. encoded as the 3-byte sequence ED A0 80..ED BF BF, so every
// profile can render them the way its reference does.
type Value struct {
	Kind Kind
	// Bool is the value of a Bool.
	Bool bool
	// Str is the decoded text of a String, or the literal of a Number exactly
	// as written in the input (for example "1.0", "-0", "1E+2").
	Str string
	// Arr holds the elements of an Array.
	Arr []Value
	// Obj holds the members of an Object in input order.
	Obj []Member
}

// Member is one name/value pair of an Object.
type Member struct {
	Key   string
	Value Value
}
