package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/dashboard"
)

func init() { register(newDashboardCmd) }

type dashboardFlags struct {
	node     string
	listen   string
	auditDir string
}

func newDashboardCmd(a *app) *cobra.Command {
	f := &dashboardFlags{}
	cmd := &cobra.Command{
		Use:   "dashboard --node URL [--listen 127.0.0.1:0]",
		Short: "Serve the web dashboard for any node",
		Long: `dashboard serves the web UI a node serves at /ui (the registry live, join
certificates and revocations, evidence timelines, the audit matrix, the
composition graph) for the node whose HTTP listener --node names, reading
it through that node's JSON-RPC HTTP bridge. It prints the dashboard's URL
and serves until interrupted.

Without a key it shows what the node shows anyone; an operator signs in on
/ui/login with a key of the node, which the dashboard presents to the node
(X-CHP-Key) for that browser only. --listen must be a loopback address:
the dashboard holds the signed-in operators' keys. The audit matrix covers
the sockets of this machine's biomeos directory (--audit-dir).

` + exitContract,
		Example: `  capmesh server --http 127.0.0.1:8080 &
  capmesh dashboard --node http://127.0.0.1:8080 --listen 127.0.0.1:8081`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDashboard(cmd.Context(), a, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.node, "node", "", "base URL of the node's HTTP listener (http://HOST:PORT)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "loopback address to serve the dashboard on")
	fl.StringVar(&f.auditDir, "audit-dir", "", "socket directory of the audit matrix (default $BIOMEOS_SOCKET_DIR or $XDG_RUNTIME_DIR/biomeos)")
	return markGracefulStop(cmd)
}

// nodeBase checks --node and returns it without a trailing slash.
func nodeBase(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", usageErrorf("--node %q: want the node's HTTP base URL, http://HOST:PORT", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// loopbackListen refuses a --listen address beyond loopback.
func loopbackListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErrorf("--listen %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return usageErrorf("--listen %q: the dashboard serves loopback only (it holds the operators' keys)", addr)
	}
	return nil
}

func runDashboard(ctx context.Context, a *app, f *dashboardFlags) error {
	if f.node == "" {
		return usageErrorf("--node is required")
	}
	base, err := nodeBase(f.node)
	if err != nil {
		return err
	}
	if err := loopbackListen(f.listen); err != nil {
		return err
	}
	// The node must answer before the dashboard serves.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(pctx, http.MethodGet, base+"/health", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return withCode(exitNetwork, fmt.Errorf("node %s: %w", base, err))
	}
	_ = res.Body.Close()

	d, err := dashboard.New(dashboard.Config{Node: func() string { return base }, AuditDir: f.auditDir, Logger: a.log})
	if err != nil {
		return err
	}
	defer d.Close()
	l, err := net.Listen("tcp", f.listen)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--listen: %w", err))
	}
	hs := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	fmt.Fprintf(a.stdout, "dashboard for %s at http://%s%s/\n", base, l.Addr(), dashboard.Prefix)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	d.Close()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
