package conformance

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capmesh/capmesh/endpoint"
)

// Socket is one entry of a socket directory.
type Socket struct {
	// Path is the socket file.
	Path string
	// Links are the symlinks in the directory that point at it (domain
	// symlinks); they are not audited separately.
	Links []string
}

// Discover lists the sockets in dir (the biomeos directory), with the
// symlinks that resolve to each, and the symlinks whose target is gone.
// Sockets reached only through a symlink to another directory are listed
// by their link path.
func Discover(dir string) (sockets []Socket, dangling []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		realDir = filepath.Clean(dir)
	}
	byTarget := map[string]int{}
	add := func(path, resolved string) int {
		if i, ok := byTarget[resolved]; ok {
			return i
		}
		sockets = append(sockets, Socket{Path: path})
		byTarget[resolved] = len(sockets) - 1
		return len(sockets) - 1
	}
	var links []fs.DirEntry
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			links = append(links, e)
		case e.Type()&fs.ModeSocket != 0:
			r, err := filepath.EvalSymlinks(p)
			if err != nil {
				r = p
			}
			add(p, r)
		}
	}
	for _, e := range links {
		p := filepath.Join(dir, e.Name())
		t, err := filepath.EvalSymlinks(p)
		if err != nil {
			dangling = append(dangling, p)
			continue
		}
		fi, err := os.Stat(t)
		if err != nil || fi.Mode().Type() != fs.ModeSocket {
			continue
		}
		if filepath.Dir(t) != realDir {
			// A link into another directory: audit it under its link name.
			if _, seen := byTarget[t]; !seen {
				add(p, t)
				continue
			}
		}
		i := add(t, t)
		sockets[i].Links = append(sockets[i].Links, e.Name())
	}
	sort.Slice(sockets, func(i, j int) bool { return sockets[i].Path < sockets[j].Path })
	sort.Strings(dangling)
	return sockets, dangling, nil
}

// AuditAll audits every socket in dir concurrently and reports the sockets
// nobody listens on (refused within the connect timeout) as dead. Unless
// o sets ConnectTimeout, each socket gets ScanConnectTimeout.
func AuditAll(ctx context.Context, dir string, o *Options) (*MachineReport, error) {
	start := time.Now()
	if o == nil || o.ConnectTimeout <= 0 {
		scan := Options{}
		if o != nil {
			scan = *o
		}
		scan.ConnectTimeout = ScanConnectTimeout
		o = &scan
	}
	socks, dangling, err := Discover(dir)
	if err != nil {
		return nil, err
	}
	m := &MachineReport{Dir: dir, Dangling: dangling, Hosts: make([]*HostReport, len(socks))}
	if m.Dangling == nil {
		m.Dangling = []string{}
	}
	m.Dead = []string{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, s := range socks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			m.Hosts[i] = Audit(ctx, endpoint.Address{Scheme: "unix", Path: s.Path}, o)
		}()
	}
	wg.Wait()
	for i, h := range m.Hosts {
		if !h.Reachable && isRefused(h.Error) {
			m.Dead = append(m.Dead, socks[i].Path)
			h.Error = "dead socket: connection refused, nobody listens (stale file)"
		}
	}
	m.Duration = time.Since(start)
	return m, nil
}

// isRefused recognises a refused connection in an error message (the
// report keeps errors as text).
func isRefused(msg string) bool {
	return containsAny(msg, syscall.ECONNREFUSED.Error(), "connection refused")
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
