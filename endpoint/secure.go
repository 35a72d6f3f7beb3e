package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/capmesh/capmesh/btsp"
)

// secure completes a BTSP client handshake on c when the endpoint is one
// of this process's family (docs/btsp.md, "Which endpoints"): the process
// runs family-scoped with a seed (FAMILY_ID, FAMILY_SEED) and the endpoint
// is a family-scoped socket ("<name>-<FAMILY_ID>.sock", symlinks
// followed) or a TCP address. Anything else is dialled in cleartext: an
// unscoped socket belongs to a standalone process, which speaks no BTSP.
// A failed handshake closes c and is a DialError.
func secure(ctx context.Context, c net.Conn, a Address) (net.Conn, error) {
	cfg, err := btsp.FromEnv()
	switch {
	case errors.Is(err, btsp.ErrNoSeed):
		return c, nil // a family without a seed speaks cleartext (and says so)
	case err != nil:
		_ = c.Close()
		return nil, &DialError{Addr: a, Err: err}
	case cfg == nil || !familyEndpoint(a, cfg.FamilyID):
		return c, nil
	}
	bc := btsp.Client(c, cfg)
	if err := bc.Handshake(ctx); err != nil {
		return nil, &DialError{Addr: a, Err: fmt.Errorf("BTSP handshake: %w", err)}
	}
	return bc, nil
}

// familyEndpoint reports whether a is an endpoint of family.
func familyEndpoint(a Address, family string) bool {
	switch a.Scheme {
	case "tcp":
		return true
	case "unix":
		p := a.Path
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return strings.HasSuffix(filepath.Base(p), "-"+family+".sock")
	}
	return false
}
