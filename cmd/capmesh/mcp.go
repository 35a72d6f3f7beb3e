package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/fingerprint"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/mcpbridge"
)

func init() { register(newMCPCmd) }

func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Bridge the Model Context Protocol: MCP servers as hosts, capabilities as an MCP server",
		Long: `mcp bridges the Model Context Protocol (MCP) and capmesh both ways, with the
official MCP Go SDK.

  capmesh mcp wrap -- COMMAND [ARGS...]   serve a stdio MCP server as a capmesh host
  capmesh mcp wrap --url URL              the same for a streamable-HTTP MCP server
  capmesh mcp serve                       the node's trusted capabilities as an MCP server`,
	}
	cmd.AddCommand(newMCPWrapCmd(a), newMCPServeCmd(a))
	return cmd
}

type mcpWrapFlags struct {
	url, domain, name, socket, tcp, httpAddr, node string
	pin, maxRisk                                   string
	memory, noAnnounce, printLink                  bool
	timeout                                        time.Duration
	approval                                       []string
	actionLimit                                    int64
}

func newMCPWrapCmd(a *app) *cobra.Command {
	f := &mcpWrapFlags{}
	cmd := &cobra.Command{
		Use:   "wrap [flags] (--url URL | -- COMMAND [ARGS...])",
		Short: "Serve an MCP server's tools as a governed capmesh host",
		Long: `wrap runs COMMAND as a stdio MCP server (or connects to the streamable-HTTP
MCP server at --url) and serves its tools as a capmesh host until SIGINT or
SIGTERM: each tool is a capability <domain>.<operation> (operation: the tool
name in snake_case; the descriptor's metadata states the tool's own name)
with the tool's inputSchema, listed by a Level 3 capabilities.list and
described by CHP descriptors, and every call crosses the host's CHP boundary
(schema, policy, budgets, approval) and leaves hash-chained evidence before it
is forwarded as tools/call. The host registers with the node like any other.

Each tool's khoralabs fingerprint is in its descriptor (metadata.tool_hash).
--print-link prints them as a capability link and exits; keep it, and
"capmesh hash diff OLD NEW" (or "capmesh hash toolrefs OLD NEW") shows which
tool changed. --pin LINK refuses, by
policy and with evidence, every tool whose fingerprint is not the one in LINK.
--max-risk, --approval and --action-limit govern the tools further.`,
		Example: `  capmesh mcp wrap -- npx -y @modelcontextprotocol/server-everything
  capmesh mcp wrap --print-link -- npx -y @modelcontextprotocol/server-everything > tools.json
  capmesh mcp wrap --pin tools.json -- npx -y @modelcontextprotocol/server-everything
  capmesh mcp wrap --url http://127.0.0.1:3001/mcp --domain everything`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMCPWrap(cmd.Context(), a, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "streamable-HTTP URL of the MCP server (instead of COMMAND)")
	fl.StringVar(&f.domain, "domain", "", "capability domain (default: from the server's name)")
	fl.StringVar(&f.name, "name", "", "primal name of the host (default: the domain)")
	fl.StringVar(&f.socket, "socket", "", "Unix socket path (default: <name>.sock in the biomeos directory)")
	fl.StringVar(&f.tcp, "tcp", "", "also serve newline JSON-RPC on this address")
	fl.StringVar(&f.httpAddr, "http", "", "also serve HTTP (JSON-RPC bridge and the CHP binding) on this address")
	fl.StringVar(&f.node, "node", "", "node to register with (default: capmesh.sock in the biomeos directory, when there)")
	fl.BoolVar(&f.noAnnounce, "no-announce", false, "do not register with a node")
	fl.BoolVar(&f.memory, "memory", false, "keep the host key and the evidence in memory")
	fl.StringVar(&f.pin, "pin", "", "capability link (from --print-link) whose tool fingerprints are pinned")
	fl.StringVar(&f.maxRisk, "max-risk", "", "refuse tools above this risk tier (low, medium, high; read-only tools are low, destructive high)")
	fl.StringSliceVar(&f.approval, "approval", nil, "tools (MCP names or methods) whose every call requires approval: refused, with evidence")
	fl.Int64Var(&f.actionLimit, "action-limit", 0, "at most this many calls of each tool per correlation (0: no budget)")
	fl.BoolVar(&f.printLink, "print-link", false, "print the capability link of the server's tools and exit")
	fl.DurationVar(&f.timeout, "connect-timeout", 60*time.Second, "give up connecting to the MCP server after this long")
	cmd.MarkFlagsMutuallyExclusive("print-link", "pin")
	return markGracefulStop(cmd)
}

func runMCPWrap(ctx context.Context, a *app, f *mcpWrapFlags, args []string) error {
	var t mcp.Transport
	switch {
	case f.url != "" && len(args) > 0:
		return usageErrorf("give --url or a COMMAND, not both")
	case f.url != "":
		t = &mcp.StreamableClientTransport{Endpoint: f.url}
	case len(args) > 0:
		c := exec.Command(args[0], args[1:]...)
		c.Stderr = a.stderr
		t = &mcp.CommandTransport{Command: c}
	default:
		return usageErrorf("give the MCP server: --url URL or -- COMMAND [ARGS...]")
	}
	if f.maxRisk != "" && f.maxRisk != "low" && f.maxRisk != "medium" && f.maxRisk != "high" && f.maxRisk != "critical" {
		return usageErrorf("--max-risk %q: want low, medium, high or critical", f.maxRisk)
	}
	cfg := &mcpbridge.WrapConfig{
		Info:   host.Info{Name: f.name, Domain: f.domain},
		Logger: a.log,
		Host: &host.Config{Socket: f.socket, TCP: f.tcp, HTTP: f.httpAddr, Node: f.node, NoAnnounce: f.noAnnounce || f.printLink,
			Ephemeral: f.memory || f.printLink, DataDir: a.dataDir, Logger: a.log},
	}
	if f.printLink {
		cfg.Host.NoSocket, cfg.Host.HTTP, cfg.Host.TCP = true, "", "127.0.0.1:0"
	}
	if f.maxRisk != "" {
		cfg.Host.CHP.Policy = &governance.PolicyConfig{MaxRiskTier: f.maxRisk, Version: "capmesh-mcp-wrap"}
	}
	if f.actionLimit < 0 {
		return usageErrorf("--action-limit %d: want 0 or more", f.actionLimit)
	}
	cfg.Describe = autonomyOf(f)
	if f.pin != "" {
		v, err := readDoc(a, f.pin)
		if err != nil {
			return err
		}
		link, err := fingerprint.DecodeLink(v)
		if err != nil {
			return usageErrorf("--pin %s: %v", f.pin, err)
		}
		cfg.Pins = append([]fingerprint.ToolRef{}, link.ToolRefs...)
	}
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	b, err := mcpbridge.Wrap(cctx, t, cfg)
	cancel()
	if err != nil {
		return err
	}
	if f.printLink {
		link, err := b.Link()
		cerr := b.Close()
		if err != nil {
			return err
		}
		if err := writeJSON(a.stdout, link); err != nil {
			return err
		}
		return ignoreClosed(cerr)
	}
	for _, tl := range b.Tools() {
		state := "serving"
		if tl.Blocked {
			state = "refused by pin"
			a.log.Warn("mcp wrap: tool fingerprint differs from its pin; its calls are refused",
				"tool", tl.Name, "method", tl.Method, "hash", tl.Hash, "pinned", tl.Pinned)
		}
		a.log.Info("mcp wrap: tool", "tool", tl.Name, "method", tl.Method, "hash", fingerprint.FormatHashShort(tl.Hash), "state", state)
	}
	return b.Serve(ctx)
}

// autonomyOf returns the descriptor edit of --approval and --action-limit,
// or nil when neither is given.
func autonomyOf(f *mcpWrapFlags) func(mcpbridge.Tool, *chp.CapabilityDescriptor) {
	if len(f.approval) == 0 && f.actionLimit == 0 {
		return nil
	}
	gated := map[string]bool{}
	for _, n := range f.approval {
		gated[n] = true
	}
	return func(t mcpbridge.Tool, d *chp.CapabilityDescriptor) {
		p := &chp.AutonomyProfile{Tier: "supervised", RollbackPolicy: "none"}
		if gated[t.Name] || gated[t.Method] {
			p.Tier = "approval_required"
		}
		if f.actionLimit > 0 {
			n := f.actionLimit
			p.ActionLimit = &n
		}
		d.Autonomy = p
	}
}

// ignoreClosed drops the error of closing a stdio MCP server that exited
// when its stdin closed.
func ignoreClosed(err error) error {
	var ee *exec.ExitError
	if err == nil || errors.As(err, &ee) || errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

type mcpServeFlags struct {
	t           targetFlags
	oneHost     bool
	httpAddr    string
	allowRemote bool
}

func newMCPServeCmd(a *app) *cobra.Command {
	f := &mcpServeFlags{}
	cmd := &cobra.Command{
		Use:   "serve [--socket PATH | --tcp HOST:PORT | --name PRIMAL] [--host] [--http ADDR]",
		Short: "Serve the node's trusted capabilities (or one host's) as an MCP server",
		Long: `serve is an MCP server on stdin/stdout (or streamable HTTP with --http) whose
tools are capmesh capabilities: every capability of every provider the node
trusts (ipc.list, then each provider's chp.describe), or with --host those of
the one host given. Each tool is named by its method and has the input schema
of its CHP descriptor. A tools/call is sent to the node, which routes it to a
trusted provider whose CHP boundary governs it (with --host, to the host
itself); a denial or failure is an MCP tool error whose structured content
has the outcome, the correlation id and the evidence ids. The capabilities
are discovered again at every tools/list, so hosts that start later appear
and providers that lose trust disappear.

An MCP client configured with "capmesh mcp serve" as its server command sees
every capability on the machine whose provider is trusted.`,
		Example: `  capmesh mcp serve
  capmesh mcp serve --host --name kvhost
  capmesh mcp serve --http 127.0.0.1:8931`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMCPServe(cmd.Context(), a, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.t.socket, "socket", "", "Unix socket path of the node (or host)")
	fl.StringVar(&f.t.tcp, "tcp", "", "TCP address of the node (or host)")
	fl.StringVar(&f.t.name, "name", "", "primal name: its socket in the biomeos directory (default: the capmesh node)")
	fl.DurationVar(&f.t.timeout, "timeout", 10*time.Second, "give up discovering capabilities after this long")
	cmd.MarkFlagsMutuallyExclusive("socket", "tcp", "name")
	fl.BoolVar(&f.oneHost, "host", false, "the target is one host, not a node: serve its capabilities")
	fl.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP on this address instead of stdio (loopback only, see --allow-remote)")
	fl.BoolVar(&f.allowRemote, "allow-remote", false, "allow --http on a non-loopback address: anyone who reaches it calls with this user's rights")
	return markGracefulStop(cmd)
}

func runMCPServe(ctx context.Context, a *app, f *mcpServeFlags) error {
	addr, err := f.t.address()
	if err != nil {
		return err
	}
	if f.httpAddr != "" && !f.allowRemote && !loopbackAddr(f.httpAddr) {
		return usageErrorf("--http %s: not a loopback address; every call is made with this user's rights, so serving beyond this machine needs --allow-remote", f.httpAddr)
	}
	network, target := "unix", addr.Path
	if addr.Scheme == "tcp" {
		network, target = "tcp", addr.Host
	}
	up := mcpbridge.NewUpstream(network, target)
	defer up.Close()
	discover := func(ctx context.Context) ([]mcpbridge.Capability, error) {
		ctx, cancel := context.WithTimeout(ctx, f.t.timeout)
		defer cancel()
		if f.oneHost {
			return mcpbridge.HostCapabilities(ctx, up, "")
		}
		return mcpbridge.NodeCapabilities(ctx, up, nil, a.log)
	}
	caps, err := discover(ctx)
	if err != nil {
		return withCode(exitNetwork, fmt.Errorf("%s: %w", addr, err))
	}
	a.log.Info("mcp serve: tools", "count", len(caps), "from", addr.String())
	srv := mcpbridge.NewServer(caps, up, &mcpbridge.ServeConfig{
		Implementation: &mcp.Implementation{Name: "capmesh", Version: versionString()}, Discover: discover, Logger: a.log})
	if f.httpAddr == "" {
		err := srv.Run(ctx, &mcp.IOTransport{Reader: nopReadCloser{a.stdin}, Writer: nopWriteCloser{a.stdout}})
		if err != nil && (ctx.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed)) {
			return nil
		}
		return err
	}
	l, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return err
	}
	a.log.Info("mcp serve: streamable HTTP", "addr", l.Addr().String())
	// DNS-rebinding protection is the SDK's default; cross-origin browser
	// requests are refused too, and idle sessions end.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute})
	hs := &http.Server{Handler: http.NewCrossOriginProtection().Handler(h), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loopbackAddr reports whether a host:port listen address is on loopback.
func loopbackAddr(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// nopReadCloser and nopWriteCloser keep the MCP transport from closing the
// process's standard streams.
type nopReadCloser struct {
	r interface{ Read([]byte) (int, error) }
}

func (n nopReadCloser) Read(p []byte) (int, error) { return n.r.Read(p) }
func (nopReadCloser) Close() error                 { return nil }

type nopWriteCloser struct {
	w interface{ Write([]byte) (int, error) }
}

func (n nopWriteCloser) Write(p []byte) (int, error) { return n.w.Write(p) }
func (nopWriteCloser) Close() error                  { return nil }
