package auditcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/conformance"
	"github.com/capmesh/capmesh/conformance/fakehost"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/wire"
)

type auditFlags struct {
	all            bool
	dir            string
	asJSON, junit  bool
	requireLevel   int
	requireCHP     bool
	strict         bool
	key            string
	nodeIDs        []string
	noCall, noCHP  bool
	chpDisabled    []string
	connectTimeout time.Duration
	probeTimeout   time.Duration
	response       string
	names          []string
}

// NewAudit is `capmesh audit`: the conformance audit of one host or of
// every socket on the machine, and `audit fake-host`.
func NewAudit(a cli.Env) *cobra.Command {
	f := &auditFlags{}
	cmd := &cobra.Command{
		Use:   "audit [ENDPOINT... | --name PRIMAL... | --all | --response FILE]",
		Short: "Judge hosts against the Wire Standard, IPC v3.1, CHP and RFC-005 over the real wire",
		Long: `audit probes each ENDPOINT (unix:///path, a socket path, tcp://host:port,
http://host:port for a CHP host or a JSON-RPC bridge) and checks, without
taking the host's word for anything it can verify:

  wire    the Capability Wire Standard checklist, Levels 1-3, with a reason
          for every miss: every advertised method is called with empty
          params and must not answer -32601; identity.get; health shapes;
          the signed announcement (valid, invalid, absent, or made with the
          forgeable seed-derived key); whether transport_security is true.
  ipc     Primal IPC Protocol v3.1: newline framing, -32700 on a garbage line
          with the connection still usable, -32600, -32601, id echo,
          notifications; socket directory, name, domain symlink and mode.
  chp     CHP v0.1 §11 requirements 1-9 (correlation preserved and generated,
          evidence on success, failure, denial and skip, replay in sequence
          order) and the evidence chain, re-verified offline from the export.
  rfc005  on registries: every descriptor served verifies and is live, and
          only trusted providers are returned.

--all audits every socket in the biomeos directory concurrently (connect
timeout 250 ms per socket, probe timeout 2 s; a named ENDPOINT gets 5 s to
accept), reports dead sockets and dangling
symlinks, and prints the compliance matrix of the machine. --response judges
a captured capabilities.list response offline.

The exit status is 0 when every audited host meets --require-level (and
--require-chp), 1 when one does not, 2 for a usage error and 3 when an
ENDPOINT cannot be reached. A gate over nothing fails: --all with
--require-level or --require-chp exits 1 when the directory holds no host.
--require-chp passes a host that speaks CHP but governs no capabilities
(the capmesh node) and exits 1 unless at least one audited host governs
one.`,
		Example: `  capmesh audit unix://$XDG_RUNTIME_DIR/biomeos/rhizocrypt.sock
  capmesh audit --all
  capmesh audit --all --require-level 2 --junit > audit.xml
  capmesh audit http://127.0.0.1:8899 --key k --require-chp
  capmesh audit --response nestgate.capabilities.list.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAudit(cmd.Context(), a, f, args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.all, "all", false, "audit every socket in the biomeos directory")
	fl.StringVar(&f.dir, "dir", "", "socket directory for --all (default $BIOMEOS_SOCKET_DIR or $XDG_RUNTIME_DIR/biomeos)")
	fl.BoolVar(&f.asJSON, "json", false, "print the reports as JSON")
	fl.BoolVar(&f.junit, "junit", false, "print the reports as JUnit XML (one testsuite per host)")
	fl.IntVar(&f.requireLevel, "require-level", 0, "exit 1 unless every host reaches this Wire Standard level (1-3)")
	fl.BoolVar(&f.requireCHP, "require-chp", false, "exit 1 unless every host speaks CHP and fails none of its requirements")
	fl.BoolVar(&f.strict, "strict", false, "--require-level counts only requirements observed to pass")
	fl.StringVar(&f.key, "key", os.Getenv("CHP_HOST_API_KEY"), "X-CHP-Key for CHP hosts on HTTP (default $CHP_HOST_API_KEY)")
	fl.StringSliceVar(&f.nodeIDs, "node-id", nil, "node ids to try when checking for the forgeable seed-derived announcement key")
	fl.BoolVar(&f.noCall, "no-call", false, "do not call every advertised method (Level 2 callability becomes unknown)")
	fl.BoolVar(&f.noCHP, "no-chp", false, "skip the CHP suite (it invokes capabilities)")
	fl.StringSliceVar(&f.chpDisabled, "chp-disabled", nil, "capabilities disabled on the host, to exercise CHP requirement 9")
	fl.DurationVar(&f.connectTimeout, "connect-timeout", 0, "give up connecting after this long (default 5s for a named ENDPOINT, 250ms per socket for --all)")
	fl.DurationVar(&f.probeTimeout, "probe-timeout", 2*time.Second, "give up on each call after this long")
	fl.StringSliceVar(&f.names, "name", nil, "audit the primal of this name, on its socket in the biomeos directory (repeatable; an ENDPOINT)")
	fl.StringVar(&f.response, "response", "", "judge a captured capabilities.list response (a file, - for stdin) offline")
	cmd.AddCommand(newAuditFakeHostCmd(a))
	return cmd
}

func runAudit(ctx context.Context, a cli.Env, f *auditFlags, args []string) error {
	for _, n := range f.names {
		p, err := endpoint.SocketPath(n)
		if err != nil {
			return cli.UsageErrorf("--name %q: %v", n, err)
		}
		args = append(args, "unix://"+p)
	}
	modes := 0
	for _, on := range []bool{f.all, len(args) > 0, f.response != ""} {
		if on {
			modes++
		}
	}
	switch {
	case modes == 0:
		return cli.UsageErrorf("give an ENDPOINT, --all or --response FILE")
	case modes > 1:
		return cli.UsageErrorf("ENDPOINT, --all and --response exclude one another")
	case f.asJSON && f.junit:
		return cli.UsageErrorf("--json and --junit exclude one another")
	case f.requireLevel < 0 || f.requireLevel > 3:
		return cli.UsageErrorf("--require-level %d: want 0-3", f.requireLevel)
	case f.connectTimeout < 0 || f.probeTimeout <= 0:
		return cli.UsageErrorf("timeouts must be positive")
	}
	if f.response != "" {
		return auditResponse(a, f)
	}
	opts := &conformance.Options{
		ConnectTimeout: f.connectTimeout, ProbeTimeout: f.probeTimeout,
		NoCall: f.noCall, NoCHP: f.noCHP, Key: f.key, NodeIDs: f.nodeIDs, CHPDisabled: f.chpDisabled,
	}
	m := &conformance.MachineReport{}
	if f.all {
		dir := f.dir
		if dir == "" {
			d, _, err := endpoint.SocketDir()
			if err != nil {
				return cli.UsageErrorf("socket directory: %v", err)
			}
			dir = d
		}
		var err error
		if m, err = conformance.AuditAll(ctx, dir, opts); err != nil {
			return cli.UsageErrorf("--all: %v", err)
		}
	} else {
		start := time.Now()
		for _, arg := range args {
			addr, err := endpoint.Parse(arg)
			if err != nil {
				return cli.UsageErrorf("ENDPOINT %q: %v", arg, err)
			}
			m.Hosts = append(m.Hosts, conformance.Audit(ctx, addr, opts))
		}
		m.Duration = time.Since(start)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	var err error
	switch {
	case f.asJSON:
		enc := json.NewEncoder(a.Stdout())
		enc.SetIndent("", "  ")
		if len(args) == 1 {
			err = enc.Encode(m.Hosts[0])
		} else {
			err = enc.Encode(m)
		}
	case f.junit:
		err = conformance.WriteJUnit(a.Stdout(), m)
	case len(args) == 1:
		err = conformance.WriteReport(a.Stdout(), m.Hosts[0])
	default:
		err = conformance.WriteMatrix(a.Stdout(), m)
	}
	if err != nil {
		return err
	}

	// An ENDPOINT named explicitly that cannot be reached is a network
	// error; a dead socket found by --all is a row of the matrix.
	if !f.all {
		for _, h := range m.Hosts {
			if !h.Reachable {
				return cli.WithCode(cli.ExitNetwork, fmt.Errorf("%s: %s", h.Endpoint, h.Error))
			}
		}
	}
	req := conformance.Requirement{Level: f.requireLevel, Strict: f.strict, CHP: f.requireCHP}
	if fails := m.Gate(req); len(fails) > 0 {
		for _, g := range fails {
			fmt.Fprintf(a.Stderr(), "capmesh: %s does not meet the requirement: %s\n", g.Endpoint, g.Reason)
		}
		return cli.SilentExit(cli.ExitFailure)
	}
	return nil
}

// auditResponse judges a captured capabilities.list response offline: the
// requirements only a live host can settle are reported unknown.
func auditResponse(a cli.Env, f *auditFlags) error {
	var data []byte
	var err error
	if f.response == "-" {
		data, err = io.ReadAll(io.LimitReader(a.Stdin(), 64<<20))
	} else {
		data, err = os.ReadFile(f.response)
	}
	if err != nil {
		return cli.UsageErrorf("--response: %v", err)
	}
	result := json.RawMessage(data)
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
	}
	if json.Unmarshal(data, &resp) == nil && resp.Result != nil {
		result = resp.Result // a whole JSON-RPC response
	}
	c, err := wire.Parse(result)
	if err != nil {
		return fmt.Errorf("%s: %w", f.response, err)
	}
	rep := wire.Level(c, nil)
	if f.asJSON {
		enc := json.NewEncoder(a.Stdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.Stdout(), "%s: level %d (offline: %d live requirements unobserved)\n", f.response, rep.Level, len(rep.Unobserved()))
		for _, ch := range rep.Checks {
			line := fmt.Sprintf("  %s  %s  %s", map[wire.Status]string{wire.Pass: "✓", wire.Fail: "✗", wire.Unknown: "?"}[ch.Status], ch.ID, ch.Requirement)
			if ch.Reason != "" {
				line += ": " + ch.Reason
			}
			fmt.Fprintln(a.Stdout(), line)
		}
	}
	if f.requireLevel > 0 && rep.Level < f.requireLevel {
		fmt.Fprintf(a.Stderr(), "capmesh: %s: level %d < %d\n", f.response, rep.Level, f.requireLevel)
		return cli.SilentExit(cli.ExitFailure)
	}
	return nil
}

// newAuditFakeHostCmd serves a fakehost spec: the recorded and broken hosts
// the audit is tested against, for scripts and demonstrations.
func newAuditFakeHostCmd(a cli.Env) *cobra.Command {
	var socket, specDir string
	cmd := &cobra.Command{
		Use:    "fake-host SPEC.txtar",
		Short:  "Serve a recorded or deliberately broken host from a spec file (testing aid)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return cli.UsageErrorf("%v", err)
			}
			s, err := fakehost.ParseSpec(strings.TrimSuffix(filepath.Base(args[0]), filepath.Ext(args[0])), data, specDir)
			if err != nil {
				return cli.UsageErrorf("%v", err)
			}
			if socket == "" {
				dir, _, err := endpoint.SocketDir()
				if err != nil {
					return cli.UsageErrorf("%v", err)
				}
				name := s.Socket
				if name == "" {
					name = s.Name + ".sock"
				}
				socket = filepath.Join(dir, name)
			}
			l, err := endpoint.ListenUnix(socket, nil)
			if err != nil {
				return err // cannot bind: a failure (1)
			}
			ctx := cmd.Context()
			fmt.Fprintf(a.Stdout(), "fake host %s on unix://%s\n", s.Name, l.Path())
			if err := fakehost.Serve(ctx, l, s); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "socket path (default: the spec's socket name in the biomeos directory)")
	cmd.Flags().StringVar(&specDir, "spec-dir", os.Getenv("CAPMESH_SPEC_DIR"), "directory that from: paths are relative to")
	return cmd
}
