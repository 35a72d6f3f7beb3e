package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// Target is the flags that select the endpoint a client command talks to.
type Target struct {
	Socket  string        // --socket
	TCP     string        // --tcp
	HTTP    string        // --http
	Name    string        // --name
	Timeout time.Duration // --timeout
}

// Add defines the flags on cmd: --socket, --tcp, --http and --name, one at
// most, and --timeout.
func (t *Target) Add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&t.Socket, "socket", "", "Unix socket path of the host")
	fl.StringVar(&t.TCP, "tcp", "", "TCP address of the host (host:port)")
	fl.StringVar(&t.HTTP, "http", "", "HTTP URL of the host's JSON-RPC bridge (e.g. http://127.0.0.1:8080/jsonrpc)")
	fl.StringVar(&t.Name, "name", "", "primal name: found by $<NAME>_SOCKET, its socket in the biomeos directory, the registry or $<NAME>_TCP (default: the capmesh node)")
	fl.DurationVar(&t.Timeout, "timeout", 10*time.Second, "give up after this long")
	cmd.MarkFlagsMutuallyExclusive("socket", "tcp", "http", "name")
}

// Explicit reports whether the flags name one endpoint (--socket, --tcp,
// --http); otherwise the target is discovered.
func (t *Target) Explicit() bool { return t.Socket != "" || t.TCP != "" || t.HTTP != "" }

// Discover finds the host for method when no flag names one: with --name,
// the primal (by $<NAME>_SOCKET, its family-scoped or plain socket, the
// socket directory, the registry, $<NAME>_TCP); for a domain method, a
// provider ($<DOMAIN>_SOCKET, the running node — which routes —, the domain
// symlink, the socket directory, $<DOMAIN>_TCP); otherwise the node.
func (t *Target) Discover(ctx context.Context, method string) (endpoint.Address, error) {
	q := endpoint.Query{Primal: t.Name, Method: method, Route: true, RouterFirst: t.Name == ""}
	if t.Name == "" && (endpoint.Domain(method) == "" || !discoverable(method)) {
		return t.Address()
	}
	if t.Name != "" {
		q.Method = "" // the primal answers whatever method is asked
	}
	c, f, err := endpoint.Discover(ctx, q)
	if err != nil {
		var nf *endpoint.NotFoundError
		if errors.As(err, &nf) {
			return endpoint.Address{}, WithCode(ExitNetwork, err)
		}
		if t.Name != "" {
			return endpoint.Address{}, UsageErrorf("--name: %v", err)
		}
		return endpoint.Address{}, err
	}
	c.Close()
	return f.Addr, nil
}

// discoverable: a domain.operation outside the namespaces the node answers
// itself (ipc.*, health.*, …).
func discoverable(method string) bool {
	switch endpoint.Domain(method) {
	case "ipc", "registry", "rpc", "health", "capabilities", "capability", "identity", "lifecycle", "chp":
		return false
	}
	return true
}

// Address resolves the flags to one endpoint address.
func (t *Target) Address() (endpoint.Address, error) {
	switch {
	case t.Socket != "":
		return endpoint.Address{Scheme: "unix", Path: t.Socket}, nil
	case t.TCP != "":
		a, err := endpoint.Parse("tcp://" + strings.TrimPrefix(t.TCP, "tcp://"))
		if err != nil {
			return a, UsageErrorf("--tcp: %v", err)
		}
		return a, nil
	case t.HTTP != "":
		a, err := endpoint.Parse(t.HTTP)
		if err != nil || (a.Scheme != "http" && a.Scheme != "https") {
			return a, UsageErrorf("--http %q: want an http:// or https:// URL", t.HTTP)
		}
		return a, nil
	}
	name := t.Name
	if name == "" {
		name = "capmesh"
	}
	p, err := endpoint.SocketPath(name)
	if err != nil {
		return endpoint.Address{}, UsageErrorf("--name: %v", err)
	}
	return endpoint.Address{Scheme: "unix", Path: p}, nil
}

// NetErr classifies an error from talking to a host: unreachable or lost
// connections and timeouts exit 3, over every transport (a refused HTTP
// connection is as unreachable as a missing socket). An answer the host
// gave — a JSON-RPC error, an HTTP status — is not unreachable.
func NetErr(err error) error {
	var de *endpoint.DialError
	var lost *jsonrpc.ConnectionLostError
	var ue *url.Error
	var oe *net.OpError
	if errors.As(err, &de) || errors.As(err, &lost) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ue) || errors.As(err, &oe) {
		return WithCode(ExitNetwork, err)
	}
	return err
}

// IndentJSON returns b indented by two spaces, or b as it is when it is not
// JSON.
func IndentJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}
