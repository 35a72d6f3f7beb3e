package evlog

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenFileWitnessStore: whatever the sidecar files hold, opening them
// never panics, and what loads keeps the bounds: at most MaxPerIssuer per
// issuer, MaxSidecarEntries in all, each statement once.
func FuzzOpenFileWitnessStore(f *testing.F) {
	f.Add([]byte(`{"statement":{"sequence":1,"witness":{"public_key":"k"}},"log_size":1}`+"\n"), []byte(`{"sequence":1,"anchor":{"did":"d"}}`+"\n"))
	f.Add([]byte(`{"statement":{"sequence":1,"witness":{"public_key":"k"}}}`+"\n"+`{"superseded":"00"}`+"\n"), []byte(`{"superseded":"`))
	f.Fuzz(func(t *testing.T, receipts, anchors []byte) {
		dir := t.TempDir()
		_ = os.WriteFile(filepath.Join(dir, receiptsFile), receipts, 0o600)
		_ = os.WriteFile(filepath.Join(dir, anchorsFile), anchors, 0o600)
		s, err := OpenFileWitnessStore(dir)
		if err != nil {
			return
		}
		for _, sh := range []*shelf{&s.mem.receipts, &s.mem.anchors} {
			if len(sh.entries) > MaxSidecarEntries || len(sh.digests) != len(sh.entries) {
				t.Fatalf("%d entries, %d digests", len(sh.entries), len(sh.digests))
			}
			for issuer, n := range sh.perIssuer {
				if n > MaxPerIssuer || n < 0 {
					t.Fatalf("issuer %q holds %d", issuer, n)
				}
			}
		}
		if _, err := s.Receipts(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
