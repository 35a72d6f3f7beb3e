package jsonrpc

import "sync"

// internString returns string(b), reusing a previously returned string with
// the same bytes when there is one. Method names repeat endlessly on a busy
// server; interning them removes an allocation from every request. The
// table is bounded so that a peer sending random method names cannot grow
// it without limit.
func internString(b []byte) string {
	if len(b) > maxInternLen {
		return string(b)
	}
	internMu.RLock()
	s, ok := internTab[string(b)] // no allocation: the compiler optimises map[string(b)]
	internMu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	internMu.Lock()
	if len(internTab) < maxInterned {
		internTab[s] = s
	}
	internMu.Unlock()
	return s
}

const (
	maxInterned  = 4096
	maxInternLen = 128
)

var (
	internMu  sync.RWMutex
	internTab = make(map[string]string)
)
