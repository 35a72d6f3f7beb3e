package endpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/capmesh/capmesh/jsonrpc"
)

// TestMachineID: the override wins, then the first non-empty machine-id
// file, then the host name; each source gives a different, stable
// identity that never shows the raw machine id.
func TestMachineID(t *testing.T) {
	dir := t.TempDir()
	etc, dbus, empty := filepath.Join(dir, "etc"), filepath.Join(dir, "dbus"), filepath.Join(dir, "empty")
	for f, s := range map[string]string{etc: "0123456789abcdef0123456789abcdef\n", dbus: "fedcba9876543210fedcba9876543210\n", empty: "\n"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	host := func() (string, error) { return "box-1", nil }
	noHost := func() (string, error) { return "", errors.New("no host name") }
	fromEtc := machineIDFrom("", []string{etc, dbus}, host)
	fromDbus := machineIDFrom("", []string{filepath.Join(dir, "missing"), empty, dbus}, host)
	fromHost := machineIDFrom("", []string{empty}, host)
	fromEnv := machineIDFrom(" rack-7 ", []string{etc}, host)
	unknown := machineIDFrom("", nil, noHost)
	seen := map[string]string{}
	for name, id := range map[string]string{"etc": fromEtc, "dbus": fromDbus, "host": fromHost, "env": fromEnv, "unknown": unknown} {
		if len(id) != 32 {
			t.Errorf("%s: %q is not 16 bytes of hex", name, id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s give the same identity %s", name, other, id)
		}
		seen[id] = name
	}
	if again := machineIDFrom("", []string{etc}, noHost); again != fromEtc {
		t.Errorf("the identity of one machine-id changed: %s, then %s", fromEtc, again)
	}
	if MachineIDFor("rack-7") != fromEnv {
		t.Error("MachineIDFor differs from the identity CAPMESH_MACHINE_ID gives")
	}
	if fromEtc == "0123456789abcdef0123456789abcdef" {
		t.Error("the raw machine id is exposed")
	}
	if first := MachineID(); first == "" || MachineID() != first {
		t.Error("MachineID is not stable within a process")
	}
}

// TestOnThisMachine: Unix-socket and loopback peers are this machine's.
func TestOnThisMachine(t *testing.T) {
	for _, tc := range []struct {
		p    jsonrpc.Peer
		want bool
	}{
		{jsonrpc.Peer{Transport: "unix"}, true},
		{jsonrpc.Peer{Transport: "tcp", Addr: "127.0.0.1:5000"}, true},
		{jsonrpc.Peer{Transport: "http", Addr: "[::1]:5000"}, true},
		{jsonrpc.Peer{Transport: "tcp", Addr: "192.0.2.7:5000"}, false},
		{jsonrpc.Peer{Transport: "http", Addr: "localhost:80"}, false}, // a peer address is an IP
		{jsonrpc.Peer{Transport: "tcp"}, false},
	} {
		if got := OnThisMachine(tc.p); got != tc.want {
			t.Errorf("OnThisMachine(%+v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}
