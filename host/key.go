package host

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
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
// if needed. identity.LoadOrCreate does the creating and the permission
// checks; the file is then read once more for the raw key, which the CHP
// boundary and the announcer take as an ed25519.PrivateKey (identity keeps
// its own secret unexported). The two must agree on the public key.
func loadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	ik, _, err := identity.LoadOrCreate(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var k ed25519.PrivateKey
	if blk, _ := pem.Decode(data); blk != nil {
		parsed, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ek, ok := parsed.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: not an Ed25519 key", path)
		}
		k = ek
	} else {
		seed, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(data)))
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("%s: not a PKCS#8 PEM key or a base64 Ed25519 seed", path)
		}
		k = ed25519.NewKeyFromSeed(seed)
	}
	if !bytes.Equal(k.Public().(ed25519.PublicKey), ik.Public().Bytes()) {
		return nil, fmt.Errorf("%s: key changed while it was being read", path)
	}
	return k, nil
}
