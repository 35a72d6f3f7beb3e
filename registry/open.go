package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// A StoreOpener opens the registry store a URL names, for OpenStoreURL.
type StoreOpener func(ctx context.Context, url string, log *slog.Logger) (Store, error)

var (
	storeOpenersMu sync.RWMutex
	storeOpeners   = map[string]StoreOpener{}
)

// RegisterStore makes OpenStoreURL open URLs of scheme ("etcd" for
// etcd://…) with open. A store package registers itself in its init, so
// that a program enables an engine by importing it and the registry
// library stays without its dependencies. Registering a scheme twice
// panics.
func RegisterStore(scheme string, open StoreOpener) {
	storeOpenersMu.Lock()
	defer storeOpenersMu.Unlock()
	if _, dup := storeOpeners[scheme]; dup {
		panic("registry: RegisterStore called twice for scheme " + scheme)
	}
	storeOpeners[scheme] = open
}

// OpenStoreURL opens the registry store url names (scheme://…) with the
// opener registered for its scheme.
func OpenStoreURL(ctx context.Context, url string, log *slog.Logger) (Store, error) {
	scheme, _, ok := strings.Cut(url, "://")
	if !ok || scheme == "" {
		return nil, errors.New("registry: want a store URL such as etcd://host:2379")
	}
	storeOpenersMu.RLock()
	open := storeOpeners[scheme]
	known := make([]string, 0, len(storeOpeners))
	for s := range storeOpeners {
		known = append(known, s+"://")
	}
	storeOpenersMu.RUnlock()
	if open == nil {
		slices.Sort(known)
		list := strings.Join(known, ", ")
		if list == "" {
			list = "none"
		}
		return nil, fmt.Errorf("registry: no store for %s:// URLs in this program (it knows %s)", scheme, list)
	}
	if log == nil {
		log = slog.Default()
	}
	return open(ctx, url, log)
}
