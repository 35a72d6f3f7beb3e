// Package evlog is a CHP host's view of its evidence log, beside the gate
// pipeline that writes it (package boundary): replay, chain verification
// and bundle export of one correlation; the store heads (chp-store-head-v1
// and v2) with the revocation head; the Merkle event log with its signed
// heads and proofs; and the witness statements and anchors other parties
// send about those heads, kept in a sidecar (WitnessStore), never in the
// evidence store.
//
// A Log reads the store only. It mirrors the store's global sequence
// lazily, when a head or proof is asked for, so sealing an event costs
// nothing extra. A boundary.Boundary embeds one, so these methods are
// called on the Boundary.
package evlog

import (
	"crypto/ed25519"
	"sync"
	"time"

	"github.com/capmesh/capmesh/evidence"
)

// Config configures a Log. Store and Now are required.
type Config struct {
	// HostID is the host the heads, bundles and statements name.
	HostID string
	// Key signs bundles and log heads (nil: unsigned; LogHead and the log
	// proofs then fail with ErrUnsigned).
	Key ed25519.PrivateKey
	// Store is the evidence store read.
	Store evidence.Store
	// Now is the clock.
	Now func() time.Time
	// MaxReplayLimit caps a replay page.
	MaxReplayLimit int
	// HeldRevocations returns the revocation identifiers the host holds
	// itself, for the revocation head when no RevocationSource is set
	// (nil: none).
	HeldRevocations func() []string
}

// Log is the evidence log's read side. It is safe for concurrent use.
type Log struct {
	cfg  Config
	log  headLog // the mirror of the store's sequence (head.go)
	mu   sync.Mutex
	rev  RevocationSource
	side WitnessStore
}

// New returns a Log over cfg.Store.
func New(cfg Config) *Log {
	return &Log{cfg: cfg}
}

// SetRevocationSource installs the source of the revocation head.
func (g *Log) SetRevocationSource(src RevocationSource) {
	g.mu.Lock()
	g.rev = src
	g.mu.Unlock()
}
