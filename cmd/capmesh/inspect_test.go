package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"

	"github.com/capmesh/capmesh/internal/specdata"
)

var updateGolden = flag.Bool("update-inspect", false, "rewrite the inspect golden files")

// recorded reads the result of a recorded response from the shared
// specification test data in internal/specdata, compacted
// to one line.
func recorded(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(specdata.Path("ecoprimals/real-responses/" + name))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct{ Result json.RawMessage }
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, resp.Result); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func answer(v json.RawMessage) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { return v, nil })
}

// serveHost runs a jsonrpc server with methods on a Unix socket (through
// endpoint.ListenUnix, as a host would) and returns its path.
func serveHost(t *testing.T, methods jsonrpc.Map) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "insp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "run", "h.sock")
	l, err := endpoint.ListenUnix(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = jsonrpc.NewServer(methods, nil).Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return path
}

// primalMethods is a host answering result to capabilities.list, identity
// and the health triad.
func primalMethods(result json.RawMessage, identity string) jsonrpc.Map {
	return jsonrpc.Map{
		"capabilities.list": answer(result),
		"identity.get":      answer(json.RawMessage(identity)),
		"health.liveness":   answer(json.RawMessage(`{"status":"alive"}`)),
		"health.readiness":  answer(json.RawMessage(`{"status":"ready"}`)),
		"health.check":      answer(json.RawMessage(`{"healthy":true,"state":"running"}`)),
	}
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestInspectText pins the human-readable report of a recorded primal
// (rhizoCrypt) served over a real socket.
func TestInspectText(t *testing.T) {
	path := serveHost(t, primalMethods(recorded(t, "rhizocrypt.capabilities.list.json"),
		`{"primal":"rhizocrypt","version":"0.14.17","domain":"dag","license":"AGPL-3.0-or-later"}`))
	code, out, errOut := runCLI(t, "inspect", "unix://"+path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	out = strings.ReplaceAll(out, path, "$SOCK")
	golden := filepath.Join("testdata", "inspect", "rhizocrypt.txt")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-inspect)", err)
	}
	if diff := cmp.Diff(string(want), out); diff != "" {
		t.Errorf("inspect output (-want +got):\n%s", diff)
	}
}

// TestInspectJSON inspects every recorded primal with --json.
func TestInspectJSON(t *testing.T) {
	for _, tt := range []struct {
		file     string
		level    int
		methods  int
		source   string
		probe    bool
		verified int
	}{
		{"rhizocrypt.capabilities.list.json", 3, 42, "methods", false, 1},
		{"sweetgrass.capabilities.list.json", 3, 50, "methods", false, 1},
		{"loamspine.capabilities.list.json", 2, 53, "methods", false, 1},
		{"nestgate.capabilities.list.json", 1, 74, "provided_capabilities", false, 1},
		{"songbird.capabilities.list.json", 1, 79, "methods", true, 1},
	} {
		t.Run(tt.file, func(t *testing.T) {
			result := recorded(t, tt.file)
			var env struct{ Primal, Version string }
			_ = json.Unmarshal(result, &env)
			path := serveHost(t, primalMethods(result, `{"primal":"`+env.Primal+`","version":"`+env.Version+`"}`))
			args := []string{"inspect", "--socket", path, "--json"}
			if tt.probe {
				args = append(args, "--probe-methods")
			}
			code, out, errOut := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var v struct {
				Answered string   `json:"answered_by"`
				Source   string   `json:"source"`
				Primal   string   `json:"primal"`
				Methods  []string `json:"methods"`
				Report   struct {
					Level    int `json:"level"`
					Verified int `json:"verified"`
				} `json:"report"`
				Identity   *wire.Identity `json:"identity"`
				Health     map[string]struct{ State string }
				Deviations []string `json:"deviations"`
				Groups     []struct{ Type string }
			}
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if v.Answered != "capabilities.list" || v.Source != tt.source || v.Primal != env.Primal {
				t.Errorf("answered %q source %q primal %q", v.Answered, v.Source, v.Primal)
			}
			if len(v.Methods) != tt.methods {
				t.Errorf("%d methods, want %d", len(v.Methods), tt.methods)
			}
			if v.Report.Level != tt.level || v.Report.Verified != tt.verified {
				t.Errorf("level %d verified %d, want %d/%d", v.Report.Level, v.Report.Verified, tt.level, tt.verified)
			}
			if v.Identity == nil || v.Identity.Primal != env.Primal {
				t.Errorf("identity %+v", v.Identity)
			}
			if v.Health["health.check"].State != "up" {
				t.Errorf("health %+v", v.Health)
			}
			if len(v.Groups) == 0 {
				t.Error("no groups")
			}
			if tt.probe && !strings.Contains(out, `"id": "L2.callable"`) {
				t.Error("no L2.callable check")
			}
		})
	}
}

// TestInspectSignature: a signed announcement is verified, and --node-id
// reveals the forgeable seed-derived key.
func TestInspectSignature(t *testing.T) {
	key := identity.DeriveEcoPrimalsCompat("demo", "node-1")
	methods := []string{"demo.echo", "health.liveness", "identity.get", "capabilities.list"}
	sa := wire.SignAnnouncement(key, "demo", "1.0.0", methods)
	list := wire.CapabilitiesList{Primal: "demo", Version: "1.0.0", Methods: methods, Protocol: wire.Protocol,
		Transport: []string{"uds"}, SignedAnnouncement: &sa,
		TransportSecurity: &wire.TransportSecurity{CleartextAvailable: true}}
	good, _ := json.Marshal(list)
	list.Version = "1.0.1"
	tampered, _ := json.Marshal(list)
	id := `{"primal":"demo","version":"1.0.0"}`

	path := serveHost(t, primalMethods(good, id))
	code, out, _ := runCLI(t, "inspect", path, "--node-id", "node-1")
	if code != 0 || !strings.Contains(out, "Signature     valid, ed25519 key "+sa.PublicKey+" (hex); FORGEABLE") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	if !strings.Contains(out, "BTSP not required, cleartext accepted") {
		t.Errorf("transport security not shown:\n%s", out)
	}
	_, out, _ = runCLI(t, "inspect", path, "--node-id", "node-2", "--json")
	if !strings.Contains(out, `"valid": true`) || !strings.Contains(out, `"derived_key": false`) {
		t.Errorf("JSON:\n%s", out)
	}

	path = serveHost(t, primalMethods(tampered, id))
	code, out, _ = runCLI(t, "inspect", path)
	if code != 0 || !strings.Contains(out, "Signature     INVALID: signed announcement: signature does not verify") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

func TestInspectErrors(t *testing.T) {
	dir, err := os.MkdirTemp("", "insp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"inspect", filepath.Join(dir, "none.sock")}, exitNetwork, "cannot connect"},
		{[]string{"inspect", "ftp://x"}, exitUsage, "ENDPOINT"},
		{[]string{"inspect", "a.sock", "--socket", "b.sock"}, exitUsage, "not both"},
		{[]string{"inspect", "a.sock", "--order", "random"}, exitUsage, "--order"},
		{[]string{"inspect", "a.sock", "b.sock"}, exitUsage, "accepts at most 1 arg"},
	} {
		code, _, errOut := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.stderr) {
			t.Errorf("%v: exit %d stderr %q, want %d and %q", tt.args, code, errOut, tt.code, tt.stderr)
		}
	}
}
