package endpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/capmesh/capmesh/jsonrpc"
)

// EnvMachineID, when set, is this machine's identity for MachineID
// instead of the one read from the system: for containers that share a
// baked-in /etc/machine-id, or that each have their own loopback (a
// network namespace is a machine for a loopback address).
const EnvMachineID = "CAPMESH_MACHINE_ID"

// machineIDFiles are read in order by MachineID.
var machineIDFiles = []string{"/etc/machine-id", "/var/lib/dbus/machine-id"}

var (
	machineOnce sync.Once
	machineID   string
)

// MachineID identifies the machine this process runs on, so that a
// registry fleet spanning machines can tell where an endpoint that only
// its own machine reaches (LocalOnly) was registered: CAPMESH_MACHINE_ID
// when set, else a hash of /etc/machine-id, falling back to
// /var/lib/dbus/machine-id, then to the host name. The raw machine id is
// never exposed (systemd asks applications to derive their own): the
// result is the first 16 bytes, in hex, of SHA-256 over
// "capmesh machine\x00" and the source. It is read once per process.
func MachineID() string {
	machineOnce.Do(func() {
		machineID = machineIDFrom(os.Getenv(EnvMachineID), machineIDFiles, os.Hostname)
	})
	return machineID
}

// machineIDFrom is MachineID from an override, the files to try and the
// host name.
func machineIDFrom(override string, files []string, hostname func() (string, error)) string {
	if s := strings.TrimSpace(override); s != "" {
		return MachineIDFor(s)
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return hashMachine("machine-id:" + s)
			}
		}
	}
	h, err := hostname()
	if err != nil || h == "" {
		h = "unknown"
	}
	return hashMachine("hostname:" + h)
}

// MachineIDFor is the identity MachineID returns when CAPMESH_MACHINE_ID
// is name (white space around it ignored): for a program that takes the
// name from elsewhere, such as capmesh server --machine-id, so that nodes
// named either way agree. A blank name is the caller's to refuse.
func MachineIDFor(name string) string {
	return hashMachine("env:" + strings.TrimSpace(name))
}

func hashMachine(src string) string {
	sum := sha256.Sum256([]byte("capmesh machine\x00" + src))
	return hex.EncodeToString(sum[:16])
}

// OnThisMachine reports whether p, a peer of a JSON-RPC server, is on
// this machine: a Unix-socket peer, or a TCP or HTTP peer at a loopback
// address.
func OnThisMachine(p jsonrpc.Peer) bool {
	if p.Transport == "unix" {
		return true
	}
	host, _, err := net.SplitHostPort(p.Addr)
	if err != nil {
		host = p.Addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
