package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// targetFlags select the endpoint a client command talks to.
type targetFlags struct {
	socket  string
	tcp     string
	http    string
	name    string
	timeout time.Duration
}

func (t *targetFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&t.socket, "socket", "", "Unix socket path of the host")
	fl.StringVar(&t.tcp, "tcp", "", "TCP address of the host (host:port)")
	fl.StringVar(&t.http, "http", "", "HTTP URL of the host's JSON-RPC bridge (e.g. http://127.0.0.1:8080/jsonrpc)")
	fl.StringVar(&t.name, "name", "", "primal name: found by $<NAME>_SOCKET, its socket in the biomeos directory, the registry or $<NAME>_TCP (default: the capmesh node)")
	fl.DurationVar(&t.timeout, "timeout", 10*time.Second, "give up after this long")
	cmd.MarkFlagsMutuallyExclusive("socket", "tcp", "http", "name")
}

// explicit reports whether the flags name one endpoint (--socket, --tcp,
// --http); otherwise the target is discovered.
func (t *targetFlags) explicit() bool { return t.socket != "" || t.tcp != "" || t.http != "" }

// discover finds the host for method when no flag names one: with --name,
// the primal (by $<NAME>_SOCKET, its family-scoped or plain socket, the
// socket directory, the registry, $<NAME>_TCP); for a domain method, a
// provider ($<DOMAIN>_SOCKET, the running node — which routes —, the domain
// symlink, the socket directory, $<DOMAIN>_TCP); otherwise the node.
func (t *targetFlags) discover(ctx context.Context, method string) (endpoint.Address, error) {
	q := endpoint.Query{Primal: t.name, Method: method, Route: true, RouterFirst: t.name == ""}
	if t.name == "" && (endpoint.Domain(method) == "" || !discoverable(method)) {
		return t.address()
	}
	if t.name != "" {
		q.Method = "" // the primal answers whatever method is asked
	}
	c, f, err := endpoint.Discover(ctx, q)
	if err != nil {
		var nf *endpoint.NotFoundError
		if errors.As(err, &nf) {
			return endpoint.Address{}, withCode(exitNetwork, err)
		}
		if t.name != "" {
			return endpoint.Address{}, usageErrorf("--name: %v", err)
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

// address resolves the flags to one endpoint address.
func (t *targetFlags) address() (endpoint.Address, error) {
	switch {
	case t.socket != "":
		return endpoint.Address{Scheme: "unix", Path: t.socket}, nil
	case t.tcp != "":
		a, err := endpoint.Parse("tcp://" + strings.TrimPrefix(t.tcp, "tcp://"))
		if err != nil {
			return a, usageErrorf("--tcp: %v", err)
		}
		return a, nil
	case t.http != "":
		a, err := endpoint.Parse(t.http)
		if err != nil || (a.Scheme != "http" && a.Scheme != "https") {
			return a, usageErrorf("--http %q: want an http:// or https:// URL", t.http)
		}
		return a, nil
	}
	name := t.name
	if name == "" {
		name = "capmesh"
	}
	p, err := endpoint.SocketPath(name)
	if err != nil {
		return endpoint.Address{}, usageErrorf("--name: %v", err)
	}
	return endpoint.Address{Scheme: "unix", Path: p}, nil
}

func init() { register(newCallCmd) }

func newCallCmd(a *app) *cobra.Command {
	t := &targetFlags{}
	var raw, chpHTTP bool
	var key string
	cmd := &cobra.Command{
		Use:   "call [--socket PATH | --tcp HOST:PORT | --http URL | --name PRIMAL] METHOD [PARAMS-JSON]",
		Short: "Call a JSON-RPC method on any host and print the result",
		Long: `Call a JSON-RPC 2.0 method and print its result as indented JSON. An error
reply is printed on stderr with its code, and the exit status is 1; a host
that cannot be reached exits 3. PARAMS-JSON is an object or an array ("-"
reads it from stdin).

With --raw the single argument is sent as one line exactly as given ("-"
reads lines from stdin) and every reply line is printed as received; the
exit status is 1 when any reply is an error.

Without --socket, --tcp or --http the host is discovered: with --name, the
primal ($<NAME>_SOCKET, its socket — family-scoped when $FAMILY_ID is
set —, the socket directory, the registry, $<NAME>_TCP); for a domain
method such as kv.seal, $<DOMAIN>_SOCKET, then the running node (which
routes the call), then the domain symlink (kv.sock), the socket
directory and $<DOMAIN>_TCP / $<DOMAIN>_PORT; any other method goes to
the node.

A JSON array as PARAMS-JSON is sent as positional params. A capability
method (a CHP-governed domain.operation) takes an object: the host hands an
array to the capability as {"args": [...]}, so a schema error then names
"args"; write the params as an object.`,
		Example: `  capmesh call health.liveness
  capmesh call --name beardog capabilities.list
  capmesh call --tcp 127.0.0.1:9000 kv.put '{"key":"a","value":"1"}'
  capmesh call --raw '{"jsonrpc":"2.0","method":"ping","id":1}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if raw {
				return cobra.ExactArgs(1)(cmd, args)
			}
			return cobra.RangeArgs(1, 2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), t.timeout)
			defer cancel()
			var addr endpoint.Address
			var err error
			switch {
			case t.explicit():
				addr, err = t.address()
			case raw:
				addr, err = t.discover(ctx, "")
			default:
				addr, err = t.discover(ctx, args[0])
			}
			if err != nil {
				return err
			}
			if raw {
				return callRaw(ctx, a, addr, args[0])
			}
			var params json.RawMessage
			if len(args) == 2 {
				p := []byte(args[1])
				if args[1] == "-" {
					if p, err = io.ReadAll(a.stdin); err != nil {
						return err
					}
				}
				p = bytes.TrimSpace(p)
				if !json.Valid(p) || (len(p) > 0 && p[0] != '{' && p[0] != '[') {
					return usageErrorf("PARAMS-JSON must be a JSON object or array, got %q", truncateArg(string(p)))
				}
				params = p
			}
			k := callKey(key)
			if chpHTTP {
				if addr.Scheme != "http" && addr.Scheme != "https" {
					return usageErrorf("--chp calls a host's CHP HTTP binding: give --http URL")
				}
				return callCHP(ctx, a, addr, args[0], params, k)
			}
			if params, err = withKey(params, k); err != nil {
				return err
			}
			params, end := traceCall(ctx, a, args[0], params)
			err = callOnce(ctx, a, addr, args[0], params)
			end(err)
			return err
		},
	}
	t.add(cmd)
	cmd.Flags().BoolVar(&raw, "raw", false, "send the argument as one raw line and print the reply lines as received")
	cmd.Flags().StringVar(&key, "key", "", "the host's key (default $CHP_HOST_API_KEY): sent as params._meta.chp_key, or X-CHP-Key with --chp")
	cmd.Flags().BoolVar(&chpHTTP, "chp", false, "invoke METHOD through the host's CHP HTTP binding (POST /invoke with an envelope), as the reference CHP hosts are called; needs --http")
	return cmd
}

func truncateArg(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// netErr classifies an error from talking to a host: unreachable or lost
// connections and timeouts exit 3, over every transport (a refused HTTP
// connection is as unreachable as a missing socket). An answer the host
// gave — a JSON-RPC error, an HTTP status — is not unreachable.
func netErr(err error) error {
	var de *endpoint.DialError
	var lost *jsonrpc.ConnectionLostError
	var ue *url.Error
	var oe *net.OpError
	if errors.As(err, &de) || errors.As(err, &lost) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ue) || errors.As(err, &oe) {
		return withCode(exitNetwork, err)
	}
	return err
}

func callOnce(ctx context.Context, a *app, addr endpoint.Address, method string, params json.RawMessage) error {
	c, err := endpoint.DialAddress(ctx, addr, nil)
	if err != nil {
		return netErr(err)
	}
	defer c.Close()
	var result json.RawMessage
	if err := c.Call(ctx, method, params, &result); err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			fmt.Fprintf(a.stderr, "error %d: %s\n", je.Code, je.Message)
			if len(je.Data) > 0 {
				fmt.Fprintf(a.stderr, "data: %s\n", indentJSON(je.Data))
			}
			if je.Code == jsonrpc.InvalidParams && len(params) > 0 && params[0] == '[' {
				fmt.Fprintln(a.stderr, `note: PARAMS-JSON was an array; a capability receives positional params as {"args": [...]}, so its schema judged a member "args". Pass an object instead, e.g. '{"key":"a","value":"1"}'.`)
			}
			return silentExit(exitFailure)
		}
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return withCode(exitNetwork, fmt.Errorf("%s: no reply within the timeout", addr))
		}
		return netErr(fmt.Errorf("%s: %w", addr, err))
	}
	fmt.Fprintln(a.stdout, indentJSON(result))
	return nil
}

func indentJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// callRaw sends lines as given and prints reply lines as received. It
// waits for one reply per line that looks like it expects one, and stops at
// the timeout or when the host closes the connection.
func callRaw(ctx context.Context, a *app, addr endpoint.Address, arg string) error {
	var lines []string
	if arg == "-" {
		sc := bufio.NewScanner(a.stdin)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if err := sc.Err(); err != nil {
			return err
		}
	} else {
		lines = []string{arg}
	}
	errReplies := 0
	if addr.Scheme == "http" || addr.Scheme == "https" {
		hc := jsonrpc.NewHTTPClient(addr.Scheme+"://"+addr.Host+addr.Path, nil)
		for _, l := range lines {
			body, status, err := hc.Post(ctx, []byte(l))
			if err != nil {
				return netErr(&endpoint.DialError{Addr: addr, Err: err})
			}
			fmt.Fprintf(a.stderr, "HTTP %d\n", status)
			if len(body) > 0 {
				fmt.Fprintln(a.stdout, strings.TrimRight(string(body), "\n"))
			}
			if status != 200 && status != 204 || isErrorReply([]byte(body)) {
				errReplies++
			}
		}
		return rawResult(errReplies)
	}
	conn, err := endpoint.DialConn(ctx, addr)
	if err != nil {
		return netErr(err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var out bytes.Buffer
	for _, l := range lines {
		out.WriteString(l)
		out.WriteByte('\n')
	}
	if _, err := conn.Write(out.Bytes()); err != nil {
		return netErr(&endpoint.DialError{Addr: addr, Err: err})
	}
	// Half-close so the host knows no more input comes; it answers what it
	// has and closes, or we stop at the deadline.
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			fmt.Fprintln(a.stdout, strings.TrimRight(line, "\r\n"))
			if isErrorReply([]byte(line)) {
				errReplies++
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || isTimeoutErr(err) {
				return rawResult(errReplies)
			}
			return netErr(&endpoint.DialError{Addr: addr, Err: err})
		}
	}
}

// rawResult is the outcome of --raw: every reply line was printed; any
// error reply (or reply line that is not JSON-RPC) makes the exit status 1,
// as an error reply does without --raw.
func rawResult(errReplies int) error {
	if errReplies > 0 {
		return silentExit(exitFailure)
	}
	return nil
}

// isErrorReply reports whether a reply line is a JSON-RPC error response, a
// batch holding one, or not a JSON-RPC response at all.
func isErrorReply(line []byte) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return false
	}
	var one struct {
		Error json.RawMessage `json:"error"`
	}
	if line[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(line, &batch) != nil {
			return true
		}
		for _, r := range batch {
			if isErrorReply(r) {
				return true
			}
		}
		return false
	}
	if json.Unmarshal(line, &one) != nil {
		return true
	}
	return len(one.Error) > 0 && string(one.Error) != "null"
}

func isTimeoutErr(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
