package descriptor

// ParseGeneric exposes the generic path to the tests, which hold the fast
// path to it.
var ParseGeneric = parseGeneric

// FastParse exposes the fast path to the tests.
func FastParse(data []byte) (*Descriptor, bool) { return fastParse(data) }
