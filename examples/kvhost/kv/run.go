package kv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/capmesh/capmesh/endpoint"
	_ "github.com/capmesh/capmesh/evidence/postgres" // -evidence postgres://…
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

// Version is the example's version.
const Version = "1.0.0"

// Main runs kvhost with the process's arguments and returns its exit
// status, following capmesh's exit contract: 0 after a graceful stop
// (health.drain, SIGINT or SIGTERM — a service manager counts anything else
// as a failed stop), 2 for a usage error, 1 otherwise (a socket it cannot
// listen on included).
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := Run(ctx, os.Args[1:], os.Stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(os.Stderr, "kvhost:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

type usageError struct{ error }

// Run parses args, builds the host and serves until ctx ends or the host is
// drained.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("kvhost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		name     = fs.String("name", "kvhost", "primal name: the socket is <name>.sock (the domain symlink is kv.sock)")
		socket   = fs.String("socket", "", "Unix socket path (default: the biomeos directory)")
		tcp      = fs.String("tcp", "", "also serve newline JSON-RPC on this address, e.g. 127.0.0.1:9100")
		httpAddr = fs.String("http", "", "also serve HTTP (JSON-RPC at /jsonrpc and the CHP binding) on this address")
		dataDir  = fs.String("data-dir", os.Getenv("CAPMESH_DATA_DIR"), "state directory for the key and the evidence (default $XDG_STATE_HOME/capmesh)")
		memory   = fs.Bool("memory", false, "keep the key and the evidence in memory")
		evidence = fs.String("evidence", "", "keep the evidence in this database instead, e.g. postgres://user:password@host/db (one many hosts share)")
		node     = fs.String("node", "", "capmesh node to announce to (default: capmesh.sock in the biomeos directory, when there)")
		signer   = fs.String("signer", "", "where kv.seal asks for crypto.sign_ed25519 (default: the node, which routes it to a provider)")
		logLevel = fs.String("log-level", "info", "debug, info, warn or error")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kvhost [flags]\n\nA key-value capability host built with the capmesh host library.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{fmt.Errorf("-log-level %q: want debug, info, warn or error", *logLevel)}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))

	h, err := host.New(host.Info{
		Name:        *name,
		Version:     Version,
		Domain:      "kv",
		License:     "Apache-2.0",
		Description: "In-memory key-value store with versions, compare-and-swap and expiry",
	}, &host.Config{
		Socket:      *socket,
		TCP:         *tcp,
		HTTP:        *httpAddr,
		DataDir:     *dataDir,
		Ephemeral:   *memory,
		EvidenceURL: *evidence,
		Node:        *node,
		Logger:      log,
	})
	if err != nil {
		return usageError{err}
	}
	if err := Register(h, NewStore(), signerAt(h, *signer)); err != nil {
		_ = h.Close()
		return err
	}
	return h.Serve(ctx)
}

// signerAt returns how kv.seal reaches crypto.sign_ed25519: the -signer
// address, else the host's provider discovery (host.Provider: the -node,
// else $CRYPTO_SOCKET, the crypto domain symlink, the socket directory, the
// registry — a capmesh node routes the call —, $CRYPTO_TCP), so that
// sealing works with no node running.
func signerAt(h *host.Host, addr string) Signer {
	return func(ctx context.Context) (jsonrpc.Caller, error) {
		if addr != "" {
			return endpoint.Dial(ctx, addr)
		}
		return h.Provider(ctx, "crypto.sign_ed25519")
	}
}
