package host

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/internal/xdg"
)

// openKey settles the host key: the configured one, a fresh one when
// ephemeral, else the key file (created 0600 on first start by the
// identity package, which also refuses a file others can read).
func (h *Host) openKey() error {
	switch {
	case h.cfg.Key != nil:
		if len(h.cfg.Key) != ed25519.PrivateKeySize {
			return errors.New("host: Config.Key is not an Ed25519 private key")
		}
		h.key = h.cfg.Key
	case h.cfg.Ephemeral:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return fmt.Errorf("host: key: %w", err)
		}
		h.key = k
	default:
		path := h.cfg.KeyFile
		if path == "" {
			dir, err := xdg.SubDir(h.cfg.DataDir, "keys")
			if err != nil {
				return fmt.Errorf("host: key: %w", err)
			}
			path = filepath.Join(dir, h.info.Name+".pem")
		}
		k, err := loadOrCreateKey(path)
		if err != nil {
			return fmt.Errorf("host: key: %w", err)
		}
		h.key = k
	}
	ik, err := identity.NewKeyFromSeed(h.key.Seed())
	if err != nil {
		return fmt.Errorf("host: key: %w", err)
	}
	h.ikey = ik
	return nil
}

// loadOrCreateKey returns the Ed25519 key stored at path, creating it first
// if needed; identity does the creating and the permission checks.
func loadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	ik, _, err := identity.LoadOrCreate(path)
	if err != nil {
		return nil, err
	}
	return ik.Ed25519(), nil
}
