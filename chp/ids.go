package chp

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	mrand "math/rand/v2"
	"sync"
)

// NewID returns prefix + "_" + 32 random hex digits: 128 bits from a
// cryptographically strong generator, as chp-v0.2.md §13 expects of ids
// ("128-bit random by construction": a caller must not be able to guess
// another caller's invocation_id and replay its result).
//
// The bits come from ChaCha8 generators (math/rand/v2, a CSPRNG with fast
// key erasure) kept in a pool, each seeded from crypto/rand: an id costs
// tens of nanoseconds instead of a trip through the FIPS DRBG per id
// (docs/DECISIONS.md).
func NewID(prefix string) string {
	var id [1]string
	NewIDs(id[:], prefix)
	return id[0]
}

// NewIDs sets out[i] to NewID(prefixes[i]) for up to four prefixes (and
// len(out)), drawing the bits with one trip to the generator pool and the
// strings in one allocation: the pipeline draws an invocation's ids with it.
// Each prefix must be at most 8 bytes long to take no further allocation.
func NewIDs(out []string, prefixes ...string) {
	var raw [64]byte
	n := min(len(prefixes), len(out), 4)
	g := idPool.Get().(*mrand.ChaCha8)
	for i := 0; i < 16*n; i += 8 {
		binary.LittleEndian.PutUint64(raw[i:], g.Uint64())
	}
	idPool.Put(g)
	var buf [4*(maxIDPrefix+1) + 128]byte
	var ends [4]int
	b := buf[:0]
	for i, p := range prefixes[:n] {
		b = append(b, p...)
		b = append(b, '_')
		b = hex.AppendEncode(b, raw[16*i:16*i+16])
		ends[i] = len(b)
	}
	s := string(b)
	start := 0
	for i := range n {
		out[i] = s[start:ends[i]]
		start = ends[i]
	}
}

// maxIDPrefix bounds the prefixes NewIDs writes without allocating.
const maxIDPrefix = 8

var idPool = sync.Pool{New: func() any {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("chp: crypto/rand failed: " + err.Error()) // never on Linux ≥ 3.17
	}
	return mrand.NewChaCha8(seed)
}}
