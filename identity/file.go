package identity

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/capmesh/capmesh/internal/xdg"
)

// DefaultKeyFile is the name of the host identity key in the keys
// directory of the state directory.
const DefaultKeyFile = "identity.pem"

// ErrInsecureKeyFile: the key file can be read or written by someone other
// than its owner, or belongs to someone else. Load refuses it rather than
// use a key others may have copied or replaced.
var ErrInsecureKeyFile = errors.New("identity: insecure key file")

// ErrKeyExists: Save found a key at the path and left it alone.
var ErrKeyExists = fmt.Errorf("identity: key file already exists: %w", fs.ErrExist)

// maxKeyFile bounds how much of a key file Load reads.
const maxKeyFile = 64 << 10

// DefaultKeyPath returns the path of the host identity key:
// $XDG_STATE_HOME/capmesh/keys/identity.pem, or <dataDir>/keys/identity.pem
// when dataDir (the --data-dir override) is set. It creates the directories
// with mode 0700.
func DefaultKeyPath(dataDir string) (string, error) {
	dir, err := xdg.SubDir(dataDir, "keys")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, DefaultKeyFile), nil
}

// marshalPEM is the on-disk form: PKCS#8 in PEM ("PRIVATE KEY"), which
// OpenSSL, Python's cryptography and Go's x509 all read.
func (k *PrivateKey) marshalPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Save writes the key to path as a PKCS#8 PEM file with mode 0600, creating
// missing directories with mode 0700. It never overwrites: if path exists,
// it returns ErrKeyExists (which matches fs.ErrExist). The file appears
// complete or not at all.
func (k *PrivateKey) Save(path string) error { return k.save(path, false) }

// SaveReplace is Save, except that an existing file at path is replaced,
// atomically: readers see the old key or the new one, never a mix.
func (k *PrivateKey) SaveReplace(path string) error { return k.save(path, true) }

func (k *PrivateKey) save(path string, replace bool) (err error) {
	data, err := k.marshalPEM()
	if err != nil {
		return fmt.Errorf("identity: save %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("identity: save %s: %w", path, err)
	}
	// CreateTemp makes the file with mode 0600 from the start: the secret is
	// never readable by others, not even for a moment.
	tmp, err := os.CreateTemp(dir, ".identity-*.tmp")
	if err != nil {
		return fmt.Errorf("identity: save %s: %w", path, err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
		}
		os.Remove(tmp.Name())
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("identity: save %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("identity: save %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("identity: save %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("identity: save %s: %w", path, err)
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		// A hard link creates path only if it does not exist, with the
		// complete content: exclusive and atomic.
		err = os.Link(tmp.Name(), path)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrKeyExists, path)
		}
		if err != nil {
			err = writeExclusive(path, data)
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrKeyExists, path)
		}
		return fmt.Errorf("identity: save %s: %w", path, err)
	}
	syncDir(dir)
	return nil
}

// writeExclusive is the fallback for file systems without hard links.
func writeExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Load reads a private key file. The file must be a regular file owned by
// the current user with no permissions for group or others (mode 0600 or
// stricter); otherwise Load returns an error matching ErrInsecureKeyFile
// that says how to fix it. Accepted formats: PKCS#8 PEM ("PRIVATE KEY",
// what Save writes and `openssl genpkey -algorithm ed25519` produces) and
// the CHP Python reference's host_ed25519 file (the 32-byte seed in
// base64). Encrypted keys are not supported.
func Load(path string) (*PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("identity: load key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("identity: load key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInsecureKeyFile, path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o, so others can read or change it; run chmod 600 %s (and consider the key compromised if others could read it)",
			ErrInsecureKeyFile, path, perm, path)
	}
	if err := xdg.CheckOwner(fi); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInsecureKeyFile, path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("identity: load key %s: %w", path, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("identity: load key %s: file is larger than %d bytes; not a key", path, maxKeyFile)
	}
	k, err := parsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("identity: load key %s: %w", path, err)
	}
	return k, nil
}

func parsePrivateKey(data []byte) (*PrivateKey, error) {
	if block, _ := pem.Decode(data); block != nil {
		switch block.Type {
		case "PRIVATE KEY":
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("PKCS#8: %w", err)
			}
			priv, ok := key.(ed25519.PrivateKey)
			if !ok {
				return nil, fmt.Errorf("PKCS#8 key is %T, not Ed25519", key)
			}
			return NewKeyFromSeed(priv.Seed())
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("encrypted private keys are not supported; decrypt it (openssl pkey -in KEY -out PLAIN) into a 0600 file")
		default:
			return nil, fmt.Errorf("PEM block %q is not a PKCS#8 private key", block.Type)
		}
	}
	// CHP's host_ed25519: base64 of the raw 32-byte seed.
	s := strings.TrimSpace(string(data))
	if len(s) == base64.StdEncoding.EncodedLen(ed25519.SeedSize) {
		if seed, err := Decode(s, Base64); err == nil {
			return NewKeyFromSeed(seed)
		}
	}
	return nil, errors.New("not a key file: want PKCS#8 PEM (-----BEGIN PRIVATE KEY-----) or a base64 Ed25519 seed")
}

// LoadOrCreate loads the key at path, or, if there is none, generates a
// random key and saves it there (0600, directories 0700). created reports
// which happened. Two processes racing to create the key end up with the
// same one.
func LoadOrCreate(path string) (k *PrivateKey, created bool, err error) {
	k, err = Load(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	k, err = Generate()
	if err != nil {
		return nil, false, err
	}
	if err := k.Save(path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			k, err = Load(path)
			return k, false, err
		}
		return nil, false, err
	}
	return k, true, nil
}
