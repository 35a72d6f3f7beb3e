package conformance

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/capmesh/capmesh/conformance/framing"
	"github.com/capmesh/capmesh/endpoint"
)

const (
	srcIPCLocation = "Primal IPC Protocol v3.1 §Socket locations"
	srcIPCSymlink  = "Primal IPC Protocol v3.1 §Capability-domain symlinks (SHOULD)"
)

// SocketInfo describes a Unix socket endpoint on the filesystem.
type SocketInfo struct {
	// Path is the path audited; Resolved is it with symlinks followed.
	Path     string `json:"path"`
	Resolved string `json:"resolved"`
	// Mode and DirMode are the permission bits of the socket and of its
	// directory, in octal.
	Mode    string `json:"mode"`
	DirMode string `json:"dir_mode"`
	// Links are the symlinks in the same directory that point at it.
	Links []string `json:"links,omitempty"`
}

// statSocket describes path, or returns an error when it is not a socket.
func statSocket(path string) (*SocketInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return nil, fmt.Errorf("%s is not a socket", resolved)
	}
	dir := filepath.Dir(resolved)
	di, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	info := &SocketInfo{Path: path, Resolved: resolved,
		Mode: fmt.Sprintf("%04o", fi.Mode().Perm()), DirMode: fmt.Sprintf("%04o", di.Mode().Perm())}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if t, err := filepath.EvalSymlinks(p); err == nil && t == resolved {
			info.Links = append(info.Links, e.Name())
		}
	}
	return info, nil
}

// expectedSocketDir is where the Primal IPC Protocol puts sockets, or ""
// when the environment does not say (neither BIOMEOS_SOCKET_DIR nor
// XDG_RUNTIME_DIR is set). It never creates anything.
func expectedSocketDir() string {
	if d := os.Getenv("BIOMEOS_SOCKET_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "biomeos")
	}
	return ""
}

// auditFraming plays every case on its own fresh connection.
func auditFraming(ctx context.Context, addr endpoint.Address, o *Options, cases []framing.Case) []Check {
	var out []Check
	for _, c := range cases {
		ch := Check{Suite: SuiteIPC, ID: c.ID, Requirement: c.Requirement, Source: c.Source}
		err := runCase(ctx, addr, o, c)
		switch {
		case err == nil:
			ch.Status = Pass
		case c.Should:
			ch.Status, ch.Reason = Warn, err.Error()
		default:
			ch.Status, ch.Reason = Fail, err.Error()
		}
		out = append(out, ch)
	}
	return out
}

func runCase(ctx context.Context, addr endpoint.Address, o *Options, c framing.Case) error {
	// The host already answered on its first connection, so it is alive: a
	// slow accept under load is not death, and gets the probe timeout
	// rather than the discovery connect bound.
	dctx, cancel := context.WithTimeout(ctx, o.probeTimeout())
	conn, err := endpoint.DialConn(dctx, addr)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	return c.Run(ctx, conn, time.Now().Add(o.probeTimeout()))
}

// skipFraming reports every case as skipped for one reason.
func skipFraming(cases []framing.Case, reason string) []Check {
	var out []Check
	for _, c := range cases {
		out = append(out, Check{Suite: SuiteIPC, ID: c.ID, Requirement: c.Requirement, Source: c.Source, Status: Skip, Reason: reason})
	}
	return out
}

// auditSocket checks where the socket is, what it is called, its domain
// symlink and its permissions.
func auditSocket(info *SocketInfo, primal, domain string) []Check {
	loc := Check{Suite: SuiteIPC, ID: "IPC.socket_dir", Requirement: "the socket lives in $XDG_RUNTIME_DIR/biomeos (custom directories are non-conformant)", Source: srcIPCLocation}
	name := Check{Suite: SuiteIPC, ID: "IPC.socket_name", Requirement: "the socket is named <primal>.sock, or <primal>-<FAMILY_ID>.sock when family-scoped", Source: srcIPCLocation}
	link := Check{Suite: SuiteIPC, ID: "IPC.domain_symlink", Requirement: "a capability-domain symlink (<domain>.sock -> <primal>.sock) sits beside the socket", Source: srcIPCSymlink}
	mode := Check{Suite: SuiteIPC, ID: "IPC.socket_mode", Requirement: "only the owner can connect: socket 0600 or its directory 0700", Source: "capmesh security defaults (sockets 0600 in a 0700 directory); Primal IPC Protocol v3.1 §Socket locations"}

	dir := filepath.Dir(info.Resolved)
	switch want := expectedSocketDir(); {
	case want == "":
		loc.Status, loc.Reason = Unknown, "neither XDG_RUNTIME_DIR nor BIOMEOS_SOCKET_DIR is set"
	case sameDir(dir, want):
		loc.Status = Pass
	default:
		loc.Status, loc.Reason = Fail, fmt.Sprintf("socket is in %s, not %s", dir, want)
	}

	base := filepath.Base(info.Resolved)
	switch {
	case primal == "":
		name.Status, name.Reason = Unknown, "the host did not say its primal name"
	case base == primal+".sock" || (strings.HasPrefix(base, primal+"-") && strings.HasSuffix(base, ".sock")):
		name.Status = Pass
	default:
		name.Status, name.Reason = Fail, fmt.Sprintf("%s does not match primal %q", base, primal)
	}

	switch {
	case len(info.Links) == 0:
		hint := ""
		if domain != "" {
			hint = fmt.Sprintf(" (expected %s.sock -> %s)", domain, base)
		}
		link.Status, link.Reason = Warn, "no symlink in the directory points at this socket"+hint
	case domain != "" && !contains(info.Links, domain+".sock"):
		link.Status, link.Reason = Pass, fmt.Sprintf("linked as %s (identity.get says domain %q)", strings.Join(info.Links, ", "), domain)
	default:
		link.Status = Pass
	}

	var sm, dm uint32
	fmt.Sscanf(info.Mode, "%o", &sm)
	fmt.Sscanf(info.DirMode, "%o", &dm)
	switch {
	case sm&0o077 == 0 || dm&0o077 == 0:
		mode.Status = Pass
	default:
		mode.Status, mode.Reason = Warn, fmt.Sprintf("socket %s in directory %s: other local users can connect", info.Mode, info.DirMode)
	}
	return []Check{loc, name, link, mode}
}

func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
