package evidence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// An Opener opens the evidence store a URL names, for OpenURL. log
// receives the store's own reports.
type Opener func(ctx context.Context, url string, log *slog.Logger) (Store, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes OpenURL open URLs of scheme ("postgres" for
// postgres://…) with open. A store package registers itself in its init,
// so that a program enables an engine by importing it (as database/sql
// drivers do) and a host library that does not import it stays without
// its dependencies. Registering a scheme twice panics.
func Register(scheme string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("evidence: Register called twice for scheme " + scheme)
	}
	openers[scheme] = open
}

// OpenURL opens the evidence store url names (scheme://…) with the opener
// registered for its scheme.
func OpenURL(ctx context.Context, url string, log *slog.Logger) (Store, error) {
	scheme, _, ok := strings.Cut(url, "://")
	if !ok || scheme == "" {
		return nil, errors.New("evidence: want a store URL such as postgres://host/db")
	}
	openersMu.RLock()
	open := openers[scheme]
	known := make([]string, 0, len(openers))
	for s := range openers {
		known = append(known, s+"://")
	}
	openersMu.RUnlock()
	if open == nil {
		slices.Sort(known)
		return nil, fmt.Errorf("evidence: no store for %s:// URLs in this program (it knows %s)", scheme, orNone(known))
	}
	if log == nil {
		log = slog.Default()
	}
	return open(ctx, url, log)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
