package evidence_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/evidence"
)

// TestOpenURL: a URL opens with the opener registered for its scheme; an
// unknown scheme or a string that is no URL is refused with a message
// naming what the program knows.
func TestOpenURL(t *testing.T) {
	var got string
	evidence.Register("opentest", func(_ context.Context, url string, _ *slog.Logger) (evidence.Store, error) {
		got = url
		return evidence.NewMemory(), nil
	})
	ctx := context.Background()
	s, err := evidence.OpenURL(ctx, "opentest://x/y", nil)
	if err != nil || got != "opentest://x/y" {
		t.Fatalf("OpenURL = %v, opener saw %q", err, got)
	}
	s.Close()
	for _, url := range []string{"mysql://h/db", "/var/lib/evidence", "://x"} {
		_, err := evidence.OpenURL(ctx, url, nil)
		if err == nil {
			t.Fatalf("OpenURL(%q) succeeded", url)
		}
		if strings.Contains(url, "mysql") && !strings.Contains(err.Error(), "opentest://") {
			t.Errorf("OpenURL(%q) = %v, want the known schemes listed", url, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a scheme twice did not panic")
		}
	}()
	evidence.Register("opentest", nil)
}
