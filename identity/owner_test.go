//go:build unix

package identity

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/internal/xdg"
)

// TestLoadRefusesForeignOwner: a private key file that belongs to another
// user is refused even with mode 0600 (someone else controls its content).
// Changing a file's owner needs root, so the test runs only as root.
func TestLoadRefusesForeignOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	path := filepath.Join(t.TempDir(), "k.pem")
	k, _ := Generate()
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatalf("own key: %v", err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if !errors.Is(err, ErrInsecureKeyFile) || !errors.Is(err, xdg.ErrNotOwner) || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("key owned by uid 65534: %v, want ErrInsecureKeyFile wrapping xdg.ErrNotOwner and naming the uid", err)
	}
}
