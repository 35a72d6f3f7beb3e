package callcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// NewCall is `capmesh call`: one JSON-RPC call (or raw lines) to any host.
func NewCall(a cli.Env) *cobra.Command {
	t := &cli.Target{}
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
			ctx, cancel := context.WithTimeout(cmd.Context(), t.Timeout)
			defer cancel()
			var addr endpoint.Address
			var err error
			switch {
			case t.Explicit():
				addr, err = t.Address()
			case raw:
				addr, err = t.Discover(ctx, "")
			default:
				addr, err = t.Discover(ctx, args[0])
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
					if p, err = io.ReadAll(a.Stdin()); err != nil {
						return err
					}
				}
				p = bytes.TrimSpace(p)
				if !json.Valid(p) || (len(p) > 0 && p[0] != '{' && p[0] != '[') {
					return cli.UsageErrorf("PARAMS-JSON must be a JSON object or array, got %q", truncateArg(string(p)))
				}
				params = p
			}
			k := callKey(key)
			if chpHTTP {
				if addr.Scheme != "http" && addr.Scheme != "https" {
					return cli.UsageErrorf("--chp calls a host's CHP HTTP binding: give --http URL")
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
	t.Add(cmd)
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

func callOnce(ctx context.Context, a cli.Env, addr endpoint.Address, method string, params json.RawMessage) error {
	c, err := endpoint.DialAddress(ctx, addr, nil)
	if err != nil {
		return cli.NetErr(err)
	}
	defer c.Close()
	var result json.RawMessage
	if err := c.Call(ctx, method, params, &result); err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			fmt.Fprintf(a.Stderr(), "error %d: %s\n", je.Code, je.Message)
			if len(je.Data) > 0 {
				fmt.Fprintf(a.Stderr(), "data: %s\n", cli.IndentJSON(je.Data))
			}
			if je.Code == jsonrpc.InvalidParams && len(params) > 0 && params[0] == '[' {
				fmt.Fprintln(a.Stderr(), `note: PARAMS-JSON was an array; a capability receives positional params as {"args": [...]}, so its schema judged a member "args". Pass an object instead, e.g. '{"key":"a","value":"1"}'.`)
			}
			return cli.SilentExit(cli.ExitFailure)
		}
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return cli.WithCode(cli.ExitNetwork, fmt.Errorf("%s: no reply within the timeout", addr))
		}
		return cli.NetErr(fmt.Errorf("%s: %w", addr, err))
	}
	fmt.Fprintln(a.Stdout(), cli.IndentJSON(result))
	return nil
}

// callRaw sends lines as given and prints reply lines as received. It
// waits for one reply per line that looks like it expects one, and stops at
// the timeout or when the host closes the connection.
func callRaw(ctx context.Context, a cli.Env, addr endpoint.Address, arg string) error {
	var lines []string
	if arg == "-" {
		sc := bufio.NewScanner(a.Stdin())
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
		hc := jhttp.NewClient(addr.Scheme+"://"+addr.Host+addr.Path, nil)
		for _, l := range lines {
			body, status, err := hc.Post(ctx, []byte(l))
			if err != nil {
				return cli.NetErr(&endpoint.DialError{Addr: addr, Err: err})
			}
			fmt.Fprintf(a.Stderr(), "HTTP %d\n", status)
			if len(body) > 0 {
				fmt.Fprintln(a.Stdout(), strings.TrimRight(string(body), "\n"))
			}
			if status != 200 && status != 204 || isErrorReply([]byte(body)) {
				errReplies++
			}
		}
		return rawResult(errReplies)
	}
	conn, err := endpoint.DialConn(ctx, addr)
	if err != nil {
		return cli.NetErr(err)
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
		return cli.NetErr(&endpoint.DialError{Addr: addr, Err: err})
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
			fmt.Fprintln(a.Stdout(), strings.TrimRight(line, "\r\n"))
			if isErrorReply([]byte(line)) {
				errReplies++
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || isTimeoutErr(err) {
				return rawResult(errReplies)
			}
			return cli.NetErr(&endpoint.DialError{Addr: addr, Err: err})
		}
	}
}

// rawResult is the outcome of --raw: every reply line was printed; any
// error reply (or reply line that is not JSON-RPC) makes the exit status 1,
// as an error reply does without --raw.
func rawResult(errReplies int) error {
	if errReplies > 0 {
		return cli.SilentExit(cli.ExitFailure)
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
