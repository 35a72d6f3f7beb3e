package registry_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/internal/specdata"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
	"github.com/capmesh/capmesh/registry/sqlite"
)

// getGenesis fetches GET /genesis from n over real HTTP.
func getGenesis(t *testing.T, n *registry.Node) (map[string]any, []byte) {
	t.Helper()
	srv := httptest.NewServer(api.HTTPHandler(n))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/genesis")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /genesis: %d %s", resp.StatusCode, raw)
	}
	g, err := pyjson.Decode(raw)
	if err != nil {
		t.Fatalf("GET /genesis: %v", err)
	}
	return g.(map[string]any), raw
}

// checkGenesis verifies that g names root as root_public_key and na as the
// network authority, and that the root key, not the NA key, signed it.
func checkGenesis(t *testing.T, g map[string]any, root, na string) {
	t.Helper()
	if g["root_public_key"] != root {
		t.Errorf("root_public_key = %v, want the root key %s", g["root_public_key"], root)
	}
	auth, _ := g["network_authority"].(map[string]any)
	if auth["public_key"] != na {
		t.Errorf("network_authority.public_key = %v, want the NA key %s", auth["public_key"], na)
	}
	if root == na {
		t.Fatalf("root key and NA key are the same key %s (RFC-001 rule 8)", root)
	}
	sigs, _ := g["signatures"].([]any)
	if len(sigs) != 1 {
		t.Fatalf("signatures = %v", g["signatures"])
	}
	sig, _ := sigs[0].(map[string]any)
	body := map[string]any{}
	for k, v := range g {
		if k != "signatures" {
			body[k] = v
		}
	}
	msg, err := pyjson.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(sig["sig"].(string))
	pub := func(s string) ed25519.PublicKey { b, _ := base64.StdEncoding.DecodeString(s); return b }
	if sig["key_id"] != "root" || !ed25519.Verify(pub(root), msg, raw) {
		t.Errorf("genesis signature %v does not verify under the root key", sig)
	}
	if ed25519.Verify(pub(na), msg, raw) {
		t.Errorf("genesis block is signed by the NA key")
	}
}

// TestGenesisSeparateRootKey is issue 14 #9: GET /genesis publishes a root
// key distinct from the NA key, signed by the root key; the generated root
// key survives a restart; a configured one is used; the same key for both
// roles is refused. The member set is the reference sample's.
func TestGenesisSeparateRootKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	n1, err := registry.NewNode(registry.Config{Network: "SAMPLE-NET", Store: st})
	if err != nil {
		t.Fatal(err)
	}
	g1, _ := getGenesis(t, n1)
	root, na := n1.RootPublicKey(), n1.AuthorityPublicKey()
	checkGenesis(t, g1, root, na)

	sample, err := os.ReadFile(specdata.Path("genesis-mesh/samples/na-objects.json"))
	if err != nil {
		t.Fatal(err)
	}
	var objs struct {
		Genesis map[string]json.RawMessage `json:"genesis_block"`
	}
	if err := json.Unmarshal(sample, &objs); err != nil {
		t.Fatal(err)
	}
	if got, want := keysOf(g1), keysOf(objs.Genesis); got != want {
		t.Errorf("genesis members %s, reference sample has %s", got, want)
	}
	n1.Close()
	st.Close()

	st2, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	n2 := newNode(t, registry.Config{Network: "SAMPLE-NET", Store: st2})
	if n2.RootPublicKey() != root || n2.AuthorityPublicKey() != na {
		t.Errorf("restart changed the keys: root %s → %s, NA %s → %s", root, n2.RootPublicKey(), na, n2.AuthorityPublicKey())
	}
	g2, _ := getGenesis(t, n2)
	checkGenesis(t, g2, root, na)

	_, rootKey, _ := ed25519.GenerateKey(nil)
	n3 := newNode(t, registry.Config{Network: "SAMPLE-NET", RootKey: rootKey})
	g3, _ := getGenesis(t, n3)
	checkGenesis(t, g3, base64.StdEncoding.EncodeToString(rootKey.Public().(ed25519.PublicKey)), n3.AuthorityPublicKey())

	if n, err := registry.NewNode(registry.Config{Authority: rootKey, RootKey: rootKey}); err == nil || !strings.Contains(err.Error(), "must differ") {
		if n != nil {
			n.Close()
		}
		t.Errorf("NewNode with RootKey == Authority: %v, want a refusal", err)
	}
}

func keysOf[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}
