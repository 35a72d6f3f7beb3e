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

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"
	"github.com/capmesh/capmesh/tracing"
)

// version is the capmesh release; overridden at link time with
// -ldflags "-X main.version=v1.2.3".
var version = "0.1.0-dev"

// Exit codes: the one contract every command follows (exitContract).
const (
	exitOK      = cli.ExitOK
	exitFailure = cli.ExitFailure
	exitUsage   = cli.ExitUsage
	exitNetwork = cli.ExitNetwork
)

// exitContract is the exit-status paragraph every command's help ends with.
const exitContract = `Exit status (every command): 0 success, and a graceful stop of a
long-running command by SIGINT or SIGTERM; 1 failure (an error reply, an
invalid result, an unmet gate, a one-shot command interrupted); 2 usage or
configuration error (arguments, flags, files, environment variables, an
unknown command); 3 unreachable (cannot connect, connection lost, no reply
within the timeout).
`

// markGracefulStop annotates cmd as ended normally by a signal.
func markGracefulStop(cmd *cobra.Command) *cobra.Command { return cli.MarkGracefulStop(cmd) }

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
type exitError = cli.ExitError

// usageErrorf reports a usage or configuration error (exit 2).
func usageErrorf(format string, args ...any) error { return cli.UsageErrorf(format, args...) }

// withCode wraps err so that the process exits with code; nil stays nil.
func withCode(code int, err error) error { return cli.WithCode(code, err) }

// silentExit makes the process exit with code without printing anything more
// (the command already reported on stdout/stderr).
type silentExit = cli.SilentExit

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
			return a.setup(cmd)
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("capmesh {{.Version}}\n")
	root.SetHelpTemplate(root.HelpTemplate() + "\n" + exitContract)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{Code: exitUsage, Err: err}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.logLevel, "log-level", envOr("CAPMESH_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	pf.StringVar(&a.logFormat, "log-format", envOr("CAPMESH_LOG_FORMAT", "text"), "log format: text or json")
	pf.StringVar(&a.dataDir, "data-dir", os.Getenv("CAPMESH_DATA_DIR"), "state directory (default $XDG_STATE_HOME/capmesh)")
	for _, f := range commandFactories {
		root.AddCommand(f(a))
	}
	root.AddCommand(newVersionCmd(a))
	strictGroups(root)
	// The long-running commands: a signal is how they are meant to end.
	for _, path := range [][]string{{"server"}, {"registry", "watch"}, {"audit", "fake-host"}, {"chp-fixtures"}} {
		if c, rest, err := root.Find(path); err == nil && len(rest) == 0 && c != root {
			markGracefulStop(c)
		}
	}
	return root
}

// newVersionCmd is `capmesh version`, the subcommand beside --version.
func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the capmesh version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(a.stdout, "capmesh %s\n", versionString())
			return err
		},
	}
}

// strictGroups makes every command group below root (registry, keys,
// evidence, hash, descriptor, ...) refuse an unknown or misspelled
// subcommand as a usage error naming the closest ones, where cobra would
// print the group's help and exit 0. A group given no subcommand prints its
// help.
func strictGroups(root *cobra.Command) {
	for _, c := range root.Commands() {
		strictGroups(c)
		if !c.HasSubCommands() || c.Runnable() {
			continue
		}
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			cmd.SuggestionsMinimumDistance = 2
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageErrorf("%s", msg)
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}

// setup validates the global flags, naming the environment variable a value
// came from when the user did not type the flag, and builds the logger.
func (a *app) setup(cmd *cobra.Command) error {
	origin := func(flag, env string) string {
		if !cmd.Flags().Changed(flag) && os.Getenv(env) != "" {
			return env
		}
		return "--" + flag
	}
	l, err := newLogger(a.stderr, a.logLevel, a.logFormat, origin("log-level", "CAPMESH_LOG_LEVEL"), origin("log-format", "CAPMESH_LOG_FORMAT"))
	if err != nil {
		return err
	}
	a.log = l
	if a.dataDir != "" {
		if fi, err := os.Stat(a.dataDir); err == nil && !fi.IsDir() {
			return usageErrorf("%s=%q: not a directory", strings.TrimPrefix(origin("data-dir", "CAPMESH_DATA_DIR"), "--"), a.dataDir)
		}
	}
	return nil
}

// newLogger builds the logger; levelFrom and formatFrom name where the
// values came from (a flag or an environment variable) for the error.
func newLogger(w io.Writer, level, format, levelFrom, formatFrom string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("%s: want debug, info, warn or error", setting(levelFrom, level))
	}
	opts := &slog.HandlerOptions{Level: lv}
	// Every line logged on behalf of a traced call carries its trace_id
	// (and span_id): tracing.LogHandler reads them from the call's context.
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts))), nil
	case "json":
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts))), nil
	default:
		return nil, usageErrorf("%s: want text or json", setting(formatFrom, format))
	}
}

// setting words a value with its origin: --flag "v" or VARIABLE="v".
func setting(from, v string) string {
	if strings.HasPrefix(from, "--") {
		return fmt.Sprintf("%s %q", from, v)
	}
	return fmt.Sprintf("%s=%q", from, v)
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
	cmd, err := root.ExecuteContextC(ctx)
	return exitCode(ctx, cmd, err, stderr)
}

// exitCode maps the outcome of cmd to the exit contract. A signal (ctx
// cancelled) stops a long-running command gracefully (0) and interrupts a
// one-shot command before its answer (1).
func exitCode(ctx context.Context, cmd *cobra.Command, err error, stderr io.Writer) int {
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ctx.Err())) {
		if cmd != nil && cmd.Annotations[cli.GracefulStop] != "" {
			return exitOK
		}
		if err == nil {
			return exitOK
		}
		fmt.Fprintln(stderr, "capmesh: interrupted")
		return exitFailure
	}
	if err == nil {
		return exitOK
	}
	var s silentExit
	if errors.As(err, &s) {
		return int(s)
	}
	code := exitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.Code
	} else if isUsageError(err) {
		code = exitUsage
	}
	fmt.Fprintf(stderr, "capmesh: %v\n", err)
	if code == exitUsage && strings.Contains(err.Error(), "unknown command") {
		path := "capmesh"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
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
