// Package mandates is a CHP host's mandate bookkeeping for gate 5
// (chp-invocation-pipeline.md §3, chp-v0.2.md §10): the verified mandate
// revocations it holds — in memory or a sidecar file, never in the evidence
// store — and the uses counted against capped mandates (max_invocations),
// which survive a restart when kept in a uses file. Package boundary's
// mandate gate verifies a presented mandate against a State and counts its
// use there.
package mandates

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/capmesh/capmesh/chp"
)

// Config configures a State: "" keeps revocations or uses in memory.
type Config struct {
	// RevocationsFile keeps the accepted revocations (one statement a
	// line), reloaded and verified again by Open.
	RevocationsFile string
	// UsesFile keeps the counted uses (one JSON line each), reloaded by
	// Open without those of mandates expired at Now.
	UsesFile string
	// Now is the time of Open (for dropping expired uses).
	Now time.Time
	// Logger receives what is skipped on load and each accepted
	// revocation (default slog.Default()).
	Logger *slog.Logger
}

// Open returns the state, loading the files cfg names.
func Open(cfg Config) (*State, error) {
	s := &State{log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if cfg.RevocationsFile != "" {
		if err := s.loadRevocations(cfg.RevocationsFile); err != nil {
			return nil, fmt.Errorf("loading mandate revocations: %w", err)
		}
	}
	if cfg.UsesFile != "" {
		if err := s.loadUses(cfg.UsesFile, cfg.Now); err != nil {
			return nil, fmt.Errorf("loading mandate uses: %w", err)
		}
	}
	return s, nil
}

// State is a host's mandate bookkeeping: the verified mandate revocations
// it holds (revocations.go) and the uses counted against capped mandates
// (uses.go). It is safe for concurrent use.
type State struct {
	log     *slog.Logger
	mu      sync.Mutex
	revoked map[mandateKey]struct{}
	served  [][]byte       // the accepted statements, in arrival order (GET /revocations)
	path    string         // the sidecar file accepted statements are appended to ("" = memory)
	torn    bool           // the sidecar file ends without a newline
	perKey  map[string]int // held revocations per principal key

	known map[mandateKey]time.Time // mandates seen at gate 5, with their valid_until

	uses     map[mandateKey]*mandateUses
	usesPath string // the file counted uses are appended to ("" = memory)
}

// mandateKey names a mandate by its id under its principal's key: the same
// id signed by another key is another mandate (the issuer-only rule).
type mandateKey struct{ id, principalKey string }

// mandateUses is the set of invocation ids counted against a capped mandate.
type mandateUses struct {
	ids   map[string]struct{}
	until time.Time // the mandate's valid_until: after it the count is moot
}

// maxTrackedMandates is how many capped mandates are counted before expired
// ones are swept.
const maxTrackedMandates = 4096

// IsRevoked reports whether the mandate id issued under principalKey is
// revoked (chp.MandateVerifyOptions.Revoked).
func (s *State) IsRevoked(id, principalKey string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.revoked[mandateKey{id, principalKey}]
	return ok
}

// Count remembers every link of m's chain as seen (its issuer may then
// revoke it, AcceptRevocation; a new one is written to the uses file too)
// and records invocationID against every capped link — in the uses file too, when there is one, before it
// answers — or, when a link's cap is already spent by other invocations,
// records no use and returns that link with its use count. The error is
// the uses file's.
func (s *State) Count(m *chp.Mandate, invocationID string, now time.Time) (spent *chp.Mandate, used int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var capped []*mandateUses
	var recs []useRecord
	for l := m; l != nil; l = l.Parent {
		k := mandateKey{l.MandateID, l.Principal.PublicKey}
		if s.remember(k, l.ValidUntil, now) && l.MaxInvocations == 0 {
			// A capped link's use record says it was seen.
			recs = append(recs, useRecord{MandateID: k.id, PrincipalKey: k.principalKey, Until: l.ValidUntil})
		}
		if l.MaxInvocations == 0 {
			continue
		}
		if s.uses[k] == nil && len(s.uses) >= maxTrackedMandates {
			s.sweep(now)
		}
		u := s.use(k, l.ValidUntil)
		if _, again := u.ids[invocationID]; again {
			continue
		}
		if int64(len(u.ids)) >= l.MaxInvocations {
			return l, len(u.ids), nil
		}
		capped = append(capped, u)
		recs = append(recs, useRecord{MandateID: k.id, PrincipalKey: k.principalKey, InvocationID: invocationID, Until: l.ValidUntil})
	}
	if err := s.persistUses(recs); err != nil {
		return nil, 0, fmt.Errorf("mandates: recording a mandate use: %w", err)
	}
	for _, u := range capped {
		u.ids[invocationID] = struct{}{}
	}
	return nil, 0, nil
}

// sweep drops the counts of expired mandates (s.mu held).
func (s *State) sweep(now time.Time) {
	for k, u := range s.uses {
		if now.After(u.until) {
			delete(s.uses, k)
		}
	}
}
