package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestSaveLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "keys") // missing directories are created
	path := filepath.Join(dir, "identity.pem")
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{path: 0o600, dir: 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %#o, want %#o", p, fi.Mode().Perm(), want)
		}
	}
	data, _ := os.ReadFile(path)
	if !bytes.HasPrefix(data, []byte("-----BEGIN PRIVATE KEY-----\n")) {
		t.Errorf("key file is not PKCS#8 PEM:\n%s", data)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Public() != k.Public() || !bytes.Equal(got.seed(), k.seed()) {
		t.Error("loaded key differs from the saved one")
	}
	// No stray temporary files.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the key", len(entries))
	}

	// Save never overwrites.
	other, _ := Generate()
	err = other.Save(path)
	if !errors.Is(err, ErrKeyExists) || !errors.Is(err, fs.ErrExist) {
		t.Errorf("Save over an existing key: %v, want ErrKeyExists", err)
	}
	if again, _ := Load(path); again.Public() != k.Public() {
		t.Error("Save replaced an existing key")
	}
	// SaveReplace does, atomically.
	if err := other.SaveReplace(path); err != nil {
		t.Fatal(err)
	}
	if again, _ := Load(path); again.Public() != other.Public() {
		t.Error("SaveReplace did not replace the key")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced key has mode %#o", fi.Mode().Perm())
	}
}

func TestLoadRefusesInsecureFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k.pem")
	k, _ := Generate()
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []fs.FileMode{0o644, 0o640, 0o604, 0o660, 0o606} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if !errors.Is(err, ErrInsecureKeyFile) || !strings.Contains(err.Error(), "chmod 600") || !strings.Contains(err.Error(), fmt.Sprintf("%#o", mode)) {
			t.Errorf("mode %#o: %v, want ErrInsecureKeyFile telling to chmod 600", mode, err)
		}
	}
	os.Chmod(path, 0o400)
	if _, err := Load(path); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
	if _, err := Load(dir); !errors.Is(err, ErrInsecureKeyFile) {
		t.Errorf("directory: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

// copyKey copies a committed fixture into a private file.
func copyKey(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadForeignFormats(t *testing.T) {
	for _, tc := range []struct{ file, pub string }{
		{"openssl-ed25519.pem", "openssl-ed25519.pub.hex"},
		{"chp-host_ed25519", "chp-host_ed25519.pub.hex"},
	} {
		k, err := Load(copyKey(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		want, _ := os.ReadFile(filepath.Join("testdata", tc.pub))
		if got := k.Public().Hex(); got != strings.TrimSpace(string(want)) {
			t.Errorf("%s: public key %s, want %s", tc.file, got, want)
		}
	}
	for name, content := range map[string]string{
		"encrypted":   "",
		"garbage":     "not a key at all\n",
		"rsa":         "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK=\n-----END RSA PRIVATE KEY-----\n",
		"bad pkcs8":   "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"short seed":  "AAAA\n",
		"huge":        strings.Repeat("A", 70000),
		"seed+spaces": "mjbN Wp3E/AZ7t3rLTfluBxqFHREATEAcJ3c4QP24mBs=",
	} {
		path := copyKey(t, "openssl-ed25519-encrypted.pem")
		if content != "" {
			os.WriteFile(path, []byte(content), 0o600)
		}
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: loaded", name)
		} else if name == "encrypted" && !strings.Contains(err.Error(), "encrypted") {
			t.Errorf("encrypted: %v, want a message saying so", err)
		}
	}
}

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "identity.pem")
	k1, created, err := LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("first call: created=%v, %v", created, err)
	}
	k2, created, err := LoadOrCreate(path)
	if err != nil || created || k2.Public() != k1.Public() {
		t.Fatalf("second call: created=%v, %v, same key %v", created, err, k2.Public() == k1.Public())
	}
	// Racing creators agree on one key.
	race := filepath.Join(t.TempDir(), "race.pem")
	var wg sync.WaitGroup
	keys := make([]PublicKey, 8)
	errs := make([]error, 8)
	for i := range keys {
		wg.Go(func() {
			k, _, err := LoadOrCreate(race)
			errs[i] = err
			if err == nil {
				keys[i] = k.Public()
			}
		})
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || keys[i] != keys[0] {
			t.Errorf("creator %d: %v, key %v vs %v", i, errs[i], keys[i], keys[0])
		}
	}
	// An insecure existing file is an error, not a reason to make a new key.
	os.Chmod(path, 0o644)
	if _, _, err := LoadOrCreate(path); !errors.Is(err, ErrInsecureKeyFile) {
		t.Errorf("insecure existing key: %v", err)
	}
}

func TestDefaultKeyPath(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	path, err := DefaultKeyPath(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dataDir, "keys", "identity.pem"); path != want {
		t.Errorf("DefaultKeyPath = %s, want %s", path, want)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("keys directory: %v, %v", fi, err)
	}
	t.Setenv("XDG_STATE_HOME", filepath.Join(t.TempDir(), "xdg"))
	path, err = DefaultKeyPath("")
	if err != nil || !strings.HasSuffix(path, filepath.Join("xdg", "capmesh", "keys", "identity.pem")) {
		t.Errorf("DefaultKeyPath(\"\") = %s, %v", path, err)
	}
}

// TestSecretNeverPrinted: no formatting, logging or JSON path shows the seed.
func TestSecretNeverPrinted(t *testing.T) {
	k, _ := Generate()
	secrets := []string{Encode(k.seed(), Hex), Encode(k.seed(), Base64), Encode(k.priv, Hex), Encode(k.priv, Base64)}
	var out bytes.Buffer
	fmt.Fprintf(&out, "%v %+v %#v %s %x %q %v\n", k, k, k, k, k, k, []*PrivateKey{k})
	slog.New(slog.NewJSONHandler(&out, nil)).Info("loaded", "key", k)
	slog.New(slog.NewTextHandler(&out, nil)).Info("loaded", "key", k)
	if _, err := json.Marshal(map[string]any{"k": k}); err == nil {
		t.Error("json.Marshal of a private key succeeded")
	}
	for _, s := range secrets {
		if strings.Contains(out.String(), s) || strings.Contains(out.String(), strings.ToUpper(s)) {
			t.Fatalf("secret leaked in:\n%s", out.String())
		}
	}
	if !strings.Contains(out.String(), k.Public().KeyID()) {
		t.Errorf("output does not identify the key:\n%s", out.String())
	}
}

func TestPublicKeyText(t *testing.T) {
	k, _ := NewKeyFromSeed(bytes.Repeat([]byte{0}, 32))
	pub := k.Public()
	var cfg struct {
		Key PublicKey `json:"key"`
	}
	cfg.Key = pub
	data, err := json.Marshal(cfg)
	if err != nil || string(data) != `{"key":"`+pub.Base64()+`"}` {
		t.Fatalf("marshal: %s, %v", data, err)
	}
	cfg.Key = PublicKey{}
	if err := json.Unmarshal([]byte(`{"key":"`+pub.Hex()+`"}`), &cfg); err != nil || cfg.Key != pub {
		t.Errorf("unmarshal hex: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"key":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`), &cfg); !errors.Is(err, ErrSmallOrderPublicKey) {
		t.Errorf("unmarshal of the identity point: %v", err)
	}
	if _, err := json.Marshal(struct{ K PublicKey }{}); err == nil {
		t.Error("marshalled the zero key")
	}
	if pub.String() != pub.Base64() || pub.GenesisKeyID() != pub.Base64() || len(pub.KeyID()) != 16 {
		t.Error("String/GenesisKeyID/KeyID")
	}
	if _, err := NewKeyFromSeed(make([]byte, 31)); err == nil {
		t.Error("31-byte seed accepted")
	}
}

// TestCHPKeyID pins the CHP key_id of the CHP vectors' key.
func TestCHPKeyID(t *testing.T) {
	pub, err := ParsePublicKeyString("A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=")
	if err != nil {
		t.Fatal(err)
	}
	if got := pub.KeyID(); got != "56475aa75463474c" {
		t.Errorf("KeyID = %s, want 56475aa75463474c", got)
	}
}
