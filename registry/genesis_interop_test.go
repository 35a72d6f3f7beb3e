package registry_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// TestGenesisReferenceInterop runs the unmodified Genesis-Mesh reference
// (GenesisMeshLabs/genesismesh: its CLI and node library) against capmesh's
// Network-Authority HTTP binding on loopback: an operator invites, the
// reference node joins (genesis, join certificate and policy signatures
// verified by the reference), heartbeats, registers a signed descriptor,
// discovers it through its CLI and library, renews, deregisters, and is
// revoked for key compromise by the reference admin CLI, after which it is
// evicted and refused.
//
// It needs Python with the reference importable, so it is skipped unless
// configured (see docs/DECISIONS.md, "Registry and node", for the setup):
//
//	GENESIS_PY        command that runs that Python, e.g.
//	                  "chroot /opt/trixie env PYTHONPATH=/opt/gm python3"
//	GENESIS_DIR       a scratch directory as this test sees it
//	GENESIS_DIR_PY    the same directory as that Python sees it
//	                  (default GENESIS_DIR)
func TestGenesisReferenceInterop(t *testing.T) {
	py := strings.Fields(os.Getenv("GENESIS_PY"))
	dir := os.Getenv("GENESIS_DIR")
	if len(py) == 0 || dir == "" {
		t.Skip("GENESIS_PY and GENESIS_DIR not set: the Genesis-Mesh reference is not available")
	}
	pyDir := os.Getenv("GENESIS_DIR_PY")
	if pyDir == "" {
		pyDir = dir
	}
	work, err := os.MkdirTemp(dir, "interop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	pyWork := filepath.Join(pyDir, filepath.Base(work))

	// The operator key, in the reference's key-file format.
	_, op, _ := ed25519.GenerateKey(nil)
	keyFile := "# Ed25519 Private Key\n# Key ID: operator-local\n" + base64.StdEncoding.EncodeToString(op.Seed()) + "\n"
	if err := os.WriteFile(filepath.Join(work, "operator.key"), []byte(keyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	agent, err := os.ReadFile("testdata/genesis/agent.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "agent.py"), agent, 0o644); err != nil {
		t.Fatal(err)
	}

	n := newNode(t, registry.Config{Network: "capmesh-interop", OperatorKeys: map[string]ed25519.PublicKey{"operator-local": op.Public().(ed25519.PublicKey)}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.HTTPHandler(n), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	na := "http://" + l.Addr().String()

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(py[0], append(py[1:], args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	cli := func(args ...string) string { return run(append([]string{"-m", "genesis_mesh.cli"}, args...)...) }
	home := filepath.Join(pyWork, "node")
	agentPy := filepath.Join(pyWork, "agent.py")
	act := func(action string, caps ...string) map[string]any {
		t.Helper()
		outText := run(append([]string{agentPy, na, home, action}, caps...)...)
		var out map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(outText)), &out); err != nil {
			t.Fatalf("%s: %v: %q", action, err, outText)
		}
		return out
	}
	adminArgs := []string{"--na", na, "--operator-key", filepath.Join(pyWork, "operator.key"), "--operator-key-id", "operator-local"}

	// Invite (signed admin headers) and join (the reference verifies the
	// genesis block, the join certificate and the policy manifest, then
	// heartbeats).
	token := strings.TrimSpace(cli(append([]string{"admin", "invite", "--role", "client", "--validity-hours", "24"}, adminArgs...)...))
	joined := cli("join", "--na", na, "--token", token, "--config", filepath.Join(home, "config.toml"), "--validity-hours", "24")
	if !strings.Contains(joined, "Joined capmesh-interop as role:client") {
		t.Fatalf("join: %s", joined)
	}
	if hb := act("heartbeat"); hb["acknowledged"] != true {
		t.Fatalf("heartbeat: %v", hb)
	}

	// Register and discover, through the reference library and its CLI.
	reg := act("register", "llm:chat", "repo.summary")
	key, _ := reg["key"].(string)
	if ans, _ := reg["answer"].(map[string]any); ans["status"] != "registered" {
		t.Fatalf("register: %v", reg)
	}
	got := n.Find("repo.summary", registry.FindOptions{})
	if len(got) != 1 || got[0].Key != key || !got[0].Trust.Trusted {
		t.Fatalf("capmesh does not find the reference's registration: %+v", got)
	}
	if d, err := descriptor.Parse(got[0].Descriptor); err != nil || d.Verify() != nil || d.Metadata["note"] != "héllo 😀" {
		t.Fatalf("stored descriptor: %v %+v", err, d)
	}
	disc := act("discover", "llm:chat")
	if agents, _ := disc["agents"].([]any); len(agents) != 1 || agents[0].(map[string]any)["key"] != key || agents[0].(map[string]any)["endpoint"] != "wss://127.0.0.1:9443" {
		t.Fatalf("reference discover: %v", disc)
	}
	var cliDisc struct {
		Count  int              `json:"count"`
		Agents []map[string]any `json:"agents"`
	}
	if err := json.Unmarshal([]byte(cli("discover", "--na", na, "--capability", "llm:chat", "--format", "json")), &cliDisc); err != nil || cliDisc.Count != 1 || cliDisc.Agents[0]["node_public_key"] != key {
		t.Fatalf("genesis-mesh discover: %v %+v", err, cliDisc)
	}
	if disc := act("discover", "llm_chat"); len(disc["agents"].([]any)) != 0 {
		t.Fatalf("LIKE pattern matched: %v", disc)
	}

	// Renewal issues a new certificate; deregistration removes the entry
	// and a fresh registration restores it.
	if rn := act("renew"); rn["renewed"] != true || rn["new"] == rn["old"] {
		t.Fatalf("renew: %v", rn)
	}
	if dr := act("deregister"); dr["deregistered"] != true {
		t.Fatalf("deregister: %v", dr)
	}
	if got := n.Find("llm:chat", registry.FindOptions{}); len(got) != 0 {
		t.Fatalf("still registered after DELETE: %+v", got)
	}
	act("register", "llm:chat")
	if got := n.Find("llm:chat", registry.FindOptions{}); len(got) != 1 {
		t.Fatalf("re-registration: %+v", got)
	}

	// Revocation by the reference admin CLI: evicted at once, the CRL
	// (verified by the reference) lists it, and the key is refused.
	if crl := act("crl"); crl["sequence"] != float64(0) || crl["signature_valid"] != true {
		t.Fatalf("crl before: %v", crl)
	}
	var certFile struct {
		CertID string `json:"cert_id"`
	}
	b, err := os.ReadFile(filepath.Join(work, "node", "node.cert.json"))
	if err != nil || json.Unmarshal(b, &certFile) != nil {
		t.Fatalf("node.cert.json: %v", err)
	}
	cli(append([]string{"admin", "revoke", certFile.CertID, "--reason", "key_compromise"}, adminArgs...)...)
	if got := n.Find("llm:chat", registry.FindOptions{}); len(got) != 0 {
		t.Fatalf("revoked node still discoverable: %+v", got)
	}
	crl := act("crl")
	if crl["sequence"] != float64(1) || crl["signature_valid"] != true || !strings.Contains(toJSON(crl["revoked"]), certFile.CertID) {
		t.Fatalf("crl after: %v", crl)
	}
	if reg := act("register", "llm:chat"); reg["status"] != float64(403) || reg["error"] != "node_key_revoked" {
		t.Fatalf("registration after key_compromise: %v", reg)
	}
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
