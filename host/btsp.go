package host

import (
	"errors"
	"fmt"

	"github.com/capmesh/capmesh/btsp"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/wire"
)

// resolveBTSP settles the host's secure transport: Config.BTSP as given,
// else, on a family-scoped host (FAMILY_ID set, not "default"), the
// environment's FAMILY_SEED. A family-scoped host without a seed serves
// cleartext (and says so), unless RequireBTSP makes that an error.
func resolveBTSP(c *Config) (cfg *btsp.Config, warn string, err error) {
	if c.BTSP != nil {
		if c.BTSP.Seed == "" {
			return nil, "", fmt.Errorf("host: Config.BTSP: %w", btsp.ErrNoSeed)
		}
		return boundLines(c.BTSP, c), "", nil
	}
	if endpoint.FamilyID() == "" {
		return nil, "", nil
	}
	cfg, err = btsp.FromEnv()
	switch {
	case errors.Is(err, btsp.ErrNoSeed) && !c.RequireBTSP:
		return nil, "FAMILY_ID is set but FAMILY_SEED is not: the family socket serves cleartext JSON-RPC (no BTSP)", nil
	case err != nil:
		return nil, "", fmt.Errorf("host: %w", err)
	}
	return boundLines(cfg, c), "", nil
}

// boundLines returns cfg with MaxLine, when unset, at the host's
// MaxMessageBytes (default 4 MiB): a cleartext peer on a family socket
// must not make the whitelist filter buffer more of a line than the
// JSON-RPC engine would accept (btsp's own default is 16 MiB).
func boundLines(cfg *btsp.Config, c *Config) *btsp.Config {
	if cfg.MaxLine > 0 {
		return cfg
	}
	b := *cfg
	b.MaxLine = c.RPC.MaxMessageBytes
	if b.MaxLine <= 0 {
		b.MaxLine = 4 << 20 // jsonrpc.ServerOptions' default
	}
	return &b
}

// btspEnforced reports whether the host's stream listeners speak BTSP.
func (h *Host) btspEnforced() bool { return h.btsp != nil }

// transportSecurity is what the host advertises under transport_security:
// the truth about its stream listeners.
func (h *Host) transportSecurity() *wire.TransportSecurity {
	if h.btspEnforced() {
		return &wire.TransportSecurity{
			BTSPRequired:        true,
			BTSPVersion:         btsp.WireVersion,
			BTSPServerAvailable: false,
			CleartextAvailable:  false,
			CleartextMethods:    btsp.DefaultCleartextMethods(),
			Note:                "Family-scoped socket: BTSP handshake required before JSON-RPC; only the methods in cleartext_methods are served without one.",
		}
	}
	return &wire.TransportSecurity{
		BTSPRequired:        false,
		BTSPVersion:         btsp.WireVersion,
		BTSPServerAvailable: false,
		CleartextAvailable:  true,
	}
}
