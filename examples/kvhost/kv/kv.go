// Package kv is the example provider behind examples/kvhost: an in-memory
// key-value store with versions, compare-and-swap and expiry, served as
// capabilities with the host library, plus one capability it consumes from
// another host (crypto.sign_ed25519, to seal a value's digest).
//
// It exists to show a real provider built only with the public library:
// typed handlers, inferred and validated params, cost estimates, operation
// dependencies, a consumed capability, evidence for every call.
package kv

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

// CodeNotFound answers an operation on a key that does not exist.
const CodeNotFound jsonrpc.Code = errcatalog.NotFound

// CodeUnavailable answers kv.seal when no signer can be reached.
const CodeUnavailable jsonrpc.Code = errcatalog.Unavailable

// MaxValueBytes bounds one value.
const MaxValueBytes = 1 << 20

type entry struct {
	value   string
	version uint64
	expires time.Time // zero: never
}

// Store is the key-value store. It is safe for concurrent use.
type Store struct {
	mu   sync.Mutex
	m    map[string]entry
	next uint64
	now  func() time.Time
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{m: map[string]entry{}, now: time.Now} }

// get returns the live entry of key (expired entries are dropped). s.mu
// is held.
func (s *Store) getLocked(key string) (entry, bool) {
	e, ok := s.m[key]
	if ok && !e.expires.IsZero() && !s.now().Before(e.expires) {
		delete(s.m, key)
		return entry{}, false
	}
	return e, ok
}

// PutIn are the params of kv.put.
type PutIn struct {
	Key   string `json:"key" jsonschema:"the key, 1-256 bytes"`
	Value string `json:"value" jsonschema:"the value, at most 1 MiB"`
	TTLMS int64  `json:"ttl_ms,omitempty" jsonschema:"expire the entry after this many milliseconds (0: never)"`
}

// Versioned is a result carrying an entry's version.
type Versioned struct {
	Version uint64 `json:"version" jsonschema:"the entry's version, increasing with every write"`
}

// KeyIn are the params of the methods that take only a key.
type KeyIn struct {
	Key string `json:"key" jsonschema:"the key"`
}

// GetOut is the result of kv.get.
type GetOut struct {
	Value   string `json:"value"`
	Version uint64 `json:"version"`
}

// CASIn are the params of kv.cas.
type CASIn struct {
	Key     string `json:"key"`
	Version uint64 `json:"version" jsonschema:"the version read with kv.get; 0 to create the key only if it is absent"`
	Value   string `json:"value"`
}

// CASOut is the result of kv.cas.
type CASOut struct {
	Swapped bool   `json:"swapped"`
	Version uint64 `json:"version" jsonschema:"the new version when swapped, else the current one (0: absent)"`
}

// ListIn are the params of kv.list.
type ListIn struct {
	Prefix string `json:"prefix,omitempty"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many keys (default 1000)"`
}

// ListOut is the result of kv.list.
type ListOut struct {
	Keys      []string `json:"keys"`
	Truncated bool     `json:"truncated"`
}

// DigestOut is the result of kv.digest.
type DigestOut struct {
	SHA256  string `json:"sha256" jsonschema:"hex SHA-256 of the value"`
	Version uint64 `json:"version"`
}

// SealOut is the result of kv.seal.
type SealOut struct {
	DigestOut
	Signature string `json:"signature" jsonschema:"the signer's Ed25519 signature over the digest, as it returned it"`
	PublicKey string `json:"public_key,omitempty"`
}

func checkKey(k string) error {
	if len(k) == 0 || len(k) > 256 {
		return jsonrpc.Errorf(jsonrpc.InvalidParams, "Invalid params: key must be 1-256 bytes")
	}
	return nil
}

func notFound(key string) error { return jsonrpc.Errorf(CodeNotFound, "no such key %q", key) }

// Put stores value under key.
func (s *Store) Put(_ context.Context, in PutIn) (Versioned, error) {
	if err := checkKey(in.Key); err != nil {
		return Versioned{}, err
	}
	if len(in.Value) > MaxValueBytes {
		return Versioned{}, jsonrpc.Errorf(jsonrpc.InvalidParams, "Invalid params: value exceeds %d bytes", MaxValueBytes)
	}
	if in.TTLMS < 0 {
		return Versioned{}, jsonrpc.Errorf(jsonrpc.InvalidParams, "Invalid params: ttl_ms must not be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	e := entry{value: in.Value, version: s.next}
	if in.TTLMS > 0 {
		e.expires = s.now().Add(time.Duration(in.TTLMS) * time.Millisecond)
	}
	s.m[in.Key] = e
	return Versioned{Version: e.version}, nil
}

// Get returns the value of key.
func (s *Store) Get(_ context.Context, in KeyIn) (GetOut, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.getLocked(in.Key)
	if !ok {
		return GetOut{}, notFound(in.Key)
	}
	return GetOut{Value: e.value, Version: e.version}, nil
}

// Delete removes key; it reports whether it existed.
func (s *Store) Delete(_ context.Context, in KeyIn) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.getLocked(in.Key)
	delete(s.m, in.Key)
	return ok, nil
}

// CAS replaces key's value only if its version is still in.Version.
func (s *Store) CAS(_ context.Context, in CASIn) (CASOut, error) {
	if err := checkKey(in.Key); err != nil {
		return CASOut{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.getLocked(in.Key)
	cur := uint64(0)
	if ok {
		cur = e.version
	}
	if cur != in.Version {
		return CASOut{Swapped: false, Version: cur}, nil
	}
	s.next++
	s.m[in.Key] = entry{value: in.Value, version: s.next}
	return CASOut{Swapped: true, Version: s.next}, nil
}

// List returns the keys with prefix, sorted.
func (s *Store) List(_ context.Context, in ListIn) (ListOut, error) {
	limit := in.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	s.mu.Lock()
	keys := []string{}
	for k := range s.m {
		if strings.HasPrefix(k, in.Prefix) {
			if _, ok := s.getLocked(k); ok {
				keys = append(keys, k)
			}
		}
	}
	s.mu.Unlock()
	sort.Strings(keys)
	out := ListOut{Keys: keys}
	if len(keys) > limit {
		out.Keys, out.Truncated = keys[:limit], true
	}
	return out, nil
}

// Digest returns the SHA-256 of key's value.
func (s *Store) Digest(ctx context.Context, in KeyIn) (DigestOut, error) {
	g, err := s.Get(ctx, in)
	if err != nil {
		return DigestOut{}, err
	}
	sum := sha256.Sum256([]byte(g.Value))
	return DigestOut{SHA256: hex.EncodeToString(sum[:]), Version: g.Version}, nil
}

// Signer reaches a host that provides crypto.sign_ed25519: a capmesh node
// (which routes the call to a provider) or the provider itself.
type Signer func(ctx context.Context) (jsonrpc.Caller, error)

// Seal returns key's digest signed by another host through
// crypto.sign_ed25519 (message base64, as the Capability Wire Standard's
// encoding table asks).
func (s *Store) Seal(signer Signer) func(context.Context, KeyIn) (SealOut, error) {
	return func(ctx context.Context, in KeyIn) (SealOut, error) {
		d, err := s.Digest(ctx, in)
		if err != nil {
			return SealOut{}, err
		}
		if signer == nil {
			return SealOut{}, jsonrpc.Errorf(CodeUnavailable, "no signer configured")
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := signer(cctx)
		if err != nil {
			return SealOut{}, jsonrpc.Errorf(CodeUnavailable, "no signer reachable: %v", err)
		}
		defer c.Close()
		raw, _ := hex.DecodeString(d.SHA256)
		var res struct {
			Signature string `json:"signature"`
			PublicKey string `json:"public_key"`
		}
		err = c.Call(cctx, "crypto.sign_ed25519", map[string]string{"message": base64.StdEncoding.EncodeToString(raw)}, &res)
		if err != nil {
			var je *jsonrpc.Error
			if errors.As(err, &je) {
				return SealOut{}, jsonrpc.Errorf(CodeUnavailable, "crypto.sign_ed25519: %s", je.Message)
			}
			return SealOut{}, jsonrpc.Errorf(CodeUnavailable, "crypto.sign_ed25519: %v", err)
		}
		if res.Signature == "" {
			return SealOut{}, errors.New("crypto.sign_ed25519 returned no signature")
		}
		return SealOut{DigestOut: d, Signature: res.Signature, PublicKey: res.PublicKey}, nil
	}
}

// Register declares the store's capabilities on h, with their costs and
// dependencies, and the capability it consumes.
func Register(h *host.Host, s *Store, signer Signer) error {
	low := func(ms float64) host.CapOption { return host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: ms}) }
	mem := int64(MaxValueBytes)
	errs := []error{
		host.Register(h, "kv.put", s.Put, host.Description("Store a value under a key, optionally expiring"),
			host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 0.05, MemoryBytes: &mem}), host.Risk("low")),
		host.Register(h, "kv.get", s.Get, host.Description("Read a key's value and version"), low(0.05),
			host.Requires("kv.put"), host.Idempotent(), host.Risk("low")),
		host.Register(h, "kv.delete", s.Delete, host.Description("Remove a key"), low(0.05), host.Requires("kv.put"), host.Idempotent()),
		host.Register(h, "kv.cas", s.CAS, host.Description("Compare-and-swap: write only if the version is unchanged"), low(0.05),
			host.Requires("kv.get")),
		host.Register(h, "kv.list", s.List, host.Description("List keys by prefix"),
			host.Cost(wire.CostEstimate{CPU: wire.CostMedium, LatencyMS: 2}), host.Idempotent()),
		host.Register(h, "kv.digest", s.Digest, host.Description("SHA-256 of a value"), low(0.1), host.Requires("kv.put"), host.Idempotent()),
		host.Register(h, "kv.seal", s.Seal(signer), host.Description("A value's digest signed by a crypto provider"),
			host.Cost(wire.CostEstimate{CPU: wire.CostMedium, LatencyMS: 10}), host.Requires("kv.digest", "crypto.sign_ed25519"),
			host.Timeout(10*time.Second)),
		h.Consumes("crypto.sign_ed25519"),
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kv: %w", err)
	}
	return nil
}
