package jsontext

import (
	"sync"
	"sync/atomic"
)

// Intern returns string(b), reusing a previously returned string with
// the same bytes when there is one. Method names repeat endlessly on a busy
// server; interning them removes an allocation from every request. Lookups
// read an immutable map through an atomic pointer (no lock); additions copy
// it. The table is bounded so that a peer sending random method names
// cannot grow it without limit.
func Intern(b []byte) string {
	if len(b) > maxInternLen {
		return string(b)
	}
	if s, ok := (*internTab.Load())[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	internMu.Lock()
	defer internMu.Unlock()
	old := *internTab.Load()
	if _, ok := old[s]; ok || len(old) >= maxInterned {
		return s
	}
	next := make(map[string]string, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[s] = s
	internTab.Store(&next)
	return s
}

const (
	maxInterned  = 1024
	maxInternLen = 128
)

var (
	internMu  sync.Mutex
	internTab atomic.Pointer[map[string]string]
)

func init() {
	empty := map[string]string{}
	internTab.Store(&empty)
}
