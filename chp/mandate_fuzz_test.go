package chp

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParseMandate: any input is a mandate or ErrBadMandate, never a panic;
// an accepted mandate has the fields VerifyMandate relies on and verifies
// (or not) without panicking, and a chain never exceeds MandateMaxDepth.
// The committed corpus holds the spec vectors and near misses.
func FuzzParseMandate(f *testing.F) {
	for _, name := range []string{"mandate.json", "mandate-chain.json", "mandate-capped.json", "mandate-revocation.json"} {
		if raw, err := os.ReadFile(filepath.Join(specDir(f), "vectors", name)); err == nil {
			f.Add(raw)
		}
	}
	f.Add([]byte(`{"kind":"mandate","parent":{"kind":"mandate","parent":{}}}`))
	f.Add([]byte(`{"kind":"mandate","max_invocations":1e3,"depth":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMandate(data)
		if err != nil {
			if !errors.Is(err, ErrBadMandate) {
				t.Fatalf("error not ErrBadMandate: %v", err)
			}
		} else {
			if m.MandateID == "" || m.DelegateID == "" || m.ValidUntil.IsZero() || m.Principal.PublicKey == "" {
				t.Fatalf("accepted mandate without its required fields: %+v", m)
			}
			depth := 0
			for p := m.Parent; p != nil; p = p.Parent {
				depth++
			}
			if depth > MandateMaxDepth {
				t.Fatalf("accepted a chain of %d links", depth)
			}
			_ = VerifyMandate(m, MandateVerifyOptions{At: time.Now(), Delegate: "d"})
		}
		if s, err := ParseMandateRevocation(data); err == nil {
			_ = VerifyMandateRevocation(s)
		} else if !errors.Is(err, ErrBadMandate) {
			t.Fatalf("revocation error not ErrBadMandate: %v", err)
		}
	})
}
