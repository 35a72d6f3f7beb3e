package host_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/host"
)

// closeCounter is a memory store that counts its Close calls.
type closeCounter struct {
	evidence.Store
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return c.Store.Close() }

// TestEvidenceURL: Config.EvidenceURL opens the store through the opener
// its scheme registered — ahead of Ephemeral's memory store — and the
// host closes what it opened; with Config.Evidence too, or for a scheme
// no one registered, New fails naming the field.
func TestEvidenceURL(t *testing.T) {
	var opened []*closeCounter
	evidence.Register("hosttest", func(_ context.Context, url string, _ *slog.Logger) (evidence.Store, error) {
		s := &closeCounter{Store: evidence.NewMemory()}
		opened = append(opened, s)
		return s, nil
	})
	info := host.Info{Name: "urlhost", Version: "1.0.0"}
	h, err := host.New(info, &host.Config{EvidenceURL: "hosttest://db", Ephemeral: true, NoAnnounce: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if len(opened) != 1 {
		t.Fatalf("opener called %d times, want 1", len(opened))
	}
	if err := h.Close(); err != nil || opened[0].closed != 1 {
		t.Fatalf("Close = %v, store closed %d times, want 1", err, opened[0].closed)
	}
	for _, c := range []struct {
		cfg  host.Config
		want string
	}{
		{host.Config{EvidenceURL: "hosttest://db", Evidence: evidence.NewMemory(), Ephemeral: true}, "both set"},
		{host.Config{EvidenceURL: "nosuch://db", Ephemeral: true}, "Config.EvidenceURL: evidence: no store for nosuch://"},
	} {
		c.cfg.NoAnnounce, c.cfg.Logger = true, quietLogger()
		if _, err := host.New(info, &c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want %q", c.cfg.EvidenceURL, err, c.want)
		}
	}
	if len(opened) != 1 {
		t.Fatalf("a refused configuration opened a store")
	}
}
