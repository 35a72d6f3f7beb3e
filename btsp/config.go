package btsp

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// Config is one end's BTSP settings. A nil *Config is not usable: a
// handshake needs at least the family seed.
type Config struct {
	// Seed is the family seed (environment FAMILY_SEED), as text. Required.
	Seed string

	// FamilyID names the family (environment FAMILY_ID). It is reported in
	// State.FamilyID after a successful handshake: the peer proved it holds
	// this family's seed.
	FamilyID string

	// Ciphers are the suites this end accepts, in order of preference.
	// Default: ChaCha20Poly1305 only. HMACPlain and Null must be listed
	// explicitly to be accepted.
	Ciphers []string

	// Require makes an accepting end refuse plain JSON-RPC: only methods
	// for which Cleartext returns true are served without a handshake;
	// anything else is answered with the rejection frame and the
	// connection is closed. Without Require, a plain JSON-RPC connection is
	// passed through untouched.
	Require bool

	// Cleartext is the whitelist of methods served in cleartext when
	// Require is set. Nil serves none.
	Cleartext func(method string) bool

	// HandshakeTimeout bounds a whole handshake. Default 10 s.
	HandshakeTimeout time.Duration

	// MaxLine bounds one cleartext line when Require filters lines.
	// Default 16 MiB (MaxFrame).
	MaxLine int

	// Rand is the source of ephemeral keys, challenges and session ids.
	// Default crypto/rand.
	Rand io.Reader
}

func (c *Config) ciphers() []string {
	if len(c.Ciphers) == 0 {
		return []string{ChaCha20Poly1305}
	}
	return c.Ciphers
}

func (c *Config) accepts(suite string) bool { return slices.Contains(c.ciphers(), suite) }

func (c *Config) handshakeTimeout() time.Duration {
	if c.HandshakeTimeout <= 0 {
		return 10 * time.Second
	}
	return c.HandshakeTimeout
}

func (c *Config) maxLine() int {
	if c.MaxLine <= 0 {
		return MaxFrame
	}
	return c.MaxLine
}

func (c *Config) rand() io.Reader {
	if c.Rand == nil {
		return rand.Reader
	}
	return c.Rand
}

// DefaultCleartext is capmesh's cleartext whitelist on a family socket
// that requires BTSP: the discovery and health surface (health.*,
// ping, capabilities.list, capability.list, identity.get), so that
// biomeOS, audits and probes work before a handshake, as BearDog does.
// Nothing that invokes a capability, reads evidence or changes state is
// on it.
func DefaultCleartext(method string) bool {
	return slices.Contains(defaultCleartext, method)
}

var defaultCleartext = []string{"capabilities.list", "capability.list", "health", "health.check",
	"health.liveness", "health.readiness", "identity.get", "ping"}

// DefaultCleartextMethods lists DefaultCleartext's methods, sorted (what a
// host advertises in transport_security.cleartext_methods).
func DefaultCleartextMethods() []string { return slices.Clone(defaultCleartext) }

// ErrInsecureConflict is returned by FromEnv when FAMILY_ID and
// BIOMEOS_INSECURE=1 are both set: production and development modes at
// once is a configuration error.
var ErrInsecureConflict = errors.New("btsp: FAMILY_ID and BIOMEOS_INSECURE=1 are both set; choose one")

// FromEnv reads the BTSP mode of this process from its environment:
// FAMILY_ID (a family other than "default" means BTSP is required on the
// family socket), FAMILY_SEED and BIOMEOS_INSECURE. It returns nil, nil
// when no family is set (development, cleartext). A family without a
// seed is an error: the socket could accept no one.
func FromEnv() (*Config, error) {
	return fromLookup(os.LookupEnv)
}

func fromLookup(lookup func(string) (string, bool)) (*Config, error) {
	family, _ := lookup("FAMILY_ID")
	insecure, _ := lookup("BIOMEOS_INSECURE")
	if family == "default" {
		family = ""
	}
	if family != "" && insecure == "1" {
		return nil, ErrInsecureConflict
	}
	if family == "" {
		return nil, nil
	}
	seed, _ := lookup("FAMILY_SEED")
	if seed == "" {
		return nil, fmt.Errorf("btsp: FAMILY_ID=%s is set but FAMILY_SEED is empty: %w", family, ErrNoSeed)
	}
	return &Config{Seed: seed, FamilyID: family, Require: true, Cleartext: DefaultCleartext}, nil
}
