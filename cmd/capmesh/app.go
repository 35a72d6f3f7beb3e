package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is the capmesh release; overridden at link time with
// -ldflags "-X main.version=v1.2.3".
var version = "0.1.0-dev"

// Exit codes (UniBin conventions).
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitNetwork     = 3
	exitInterrupted = 130
)

// app carries what every subcommand shares: standard streams, global flags
// and the logger built from them.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	logLevel  string
	logFormat string
	dataDir   string

	log *slog.Logger
}

// commandFactory builds one top-level subcommand. Each subcommand lives in
// its own file and registers its factory from an init function, so that
// adding a command never edits a shared file.
type commandFactory func(*app) *cobra.Command

var commandFactories []commandFactory

// register adds a top-level subcommand. Call it from init.
func register(f commandFactory) { commandFactories = append(commandFactories, f) }

// exitError attaches an exit code to an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf reports a usage or configuration error (exit 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// withCode wraps err so that the process exits with code; nil stays nil.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: code, err: err}
}

// silentExit makes the process exit with code without printing anything more
// (the command already reported on stdout/stderr).
type silentExit int

func (s silentExit) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// versionString is the version capmesh reports (--version, health.check,
// capabilities.list): the link-time version, else the module version Go
// stamped into the build (a release tag, or a pseudo-version such as
// 0.0.0-20261122013938-7e1037dee50d+dirty for a checkout), without the
// leading "v" so that it is plain SemVer as the Capability Wire Standard
// asks.
func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "0.1.0-dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return strings.TrimPrefix(v, "v")
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "capmesh",
		Short: "Find, trust, call and audit capability hosts",
		Long: `capmesh runs a capability node and talks to any host that speaks the
Capability Wire Standard, the Primal IPC Protocol v3.1, RFC-005 capability
manifests or the Capability Host Protocol.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			l, err := newLogger(a.stderr, a.logLevel, a.logFormat)
			if err != nil {
				return err
			}
			a.log = l
			return nil
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("capmesh {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.logLevel, "log-level", envOr("CAPMESH_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	pf.StringVar(&a.logFormat, "log-format", envOr("CAPMESH_LOG_FORMAT", "text"), "log format: text or json")
	pf.StringVar(&a.dataDir, "data-dir", os.Getenv("CAPMESH_DATA_DIR"), "state directory (default $XDG_STATE_HOME/capmesh)")
	for _, f := range commandFactories {
		root.AddCommand(f(a))
	}
	return root
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, usageErrorf("--log-format %q: want text or json", format)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Main runs the capmesh command line with args and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, log: slog.New(slog.NewTextHandler(stderr, nil))}
	root := newRootCmd(a)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return exitCode(ctx, err, stderr)
}

func exitCode(ctx context.Context, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ctx.Err())) {
		fmt.Fprintln(stderr, "capmesh: interrupted")
		return exitInterrupted
	}
	var s silentExit
	if errors.As(err, &s) {
		return int(s)
	}
	code := exitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	} else if isUsageError(err) {
		code = exitUsage
	}
	fmt.Fprintf(stderr, "capmesh: %v\n", err)
	if code == exitUsage && strings.Contains(err.Error(), "unknown command") {
		fmt.Fprintln(stderr, "Run 'capmesh --help' for usage.")
	}
	return code
}

// isUsageError recognises cobra's own argument errors, which it returns as
// plain errors.
func isUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "requires exactly", "invalid argument", "flag needs an argument", "if any flags in the group", "at least one of the flags in the group"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
