package auditcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/compose"
	"github.com/capmesh/capmesh/conformance"
	"github.com/capmesh/capmesh/endpoint"
)

type composeFlags struct {
	all          bool
	dir          string
	endpoints    []string
	names        []string
	fromRegistry bool
	registry     string
	goal         string
	format       string
	timeout      time.Duration
}

// NewCompose is `capmesh compose`: a composition of hosts analysed and
// planned from files, live hosts or the registry.
func NewCompose(a cli.Env) *cobra.Command {
	f := &composeFlags{}
	cmd := &cobra.Command{
		Use:   "compose [GRAPH.toml | CAPABILITIES.json]... [--all] [--endpoint ADDR]... [--from-registry]",
		Short: "Prove a composition complete before deploying it, and plan execution on it",
		Long: `compose gathers a set of hosts — declared in deploy-graph files (biomeOS /
Neural API TOML, primalSpring graphs), listed as capabilities.list answers in
JSON, live on the sockets of the biomeos directory (--all, --endpoint) or in
the node's registry (--from-registry) — merges what they say about the same
primal, and reports:

  completeness  every consumed capability has a live, trusted provider
                (the missing ones, and which nodes need them)
  surface       the union of methods minus the union of consumed ones
  ambiguity     capabilities several hosts provide (the cheapest is chosen)
  cycles        start-up (depends_on), consumption and operation cycles
  waves         the start-up order, wave by wave

--goal METHOD prints an execution plan: its prerequisite chain from
operation_dependencies, each step on the cheapest provider, and the summed
cost. --format dot or mermaid draws the graph; the default is a text tree.

The exit status is 0 when the composition is complete and orderable (and
the goal, if any, can be planned), 1 when it is not, 2 for a usage error
(including a file that is neither a deploy graph nor capabilities answers)
and 3 when the registry, or a host named with --endpoint or --name, cannot
be reached.`,
		Example: `  capmesh compose graphs/nucleus_complete.toml
  capmesh compose --all --goal proof.generate
  capmesh compose deploy.toml hosts.json --format mermaid > graph.mmd
  capmesh compose --from-registry --format dot | dot -Tsvg > mesh.svg`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompose(cmd.Context(), a, f, args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.all, "all", false, "add every live host on the sockets of the biomeos directory")
	fl.StringVar(&f.dir, "dir", "", "socket directory for --all (default $BIOMEOS_SOCKET_DIR or $XDG_RUNTIME_DIR/biomeos)")
	fl.StringSliceVar(&f.endpoints, "endpoint", nil, "add the live host at this endpoint (repeatable)")
	fl.StringSliceVar(&f.names, "name", nil, "add the live primal of this name, on its socket in the biomeos directory (repeatable)")
	fl.BoolVar(&f.fromRegistry, "from-registry", false, "add the hosts registered with the capmesh node (ipc.list)")
	fl.StringVar(&f.registry, "registry", "", "registry endpoint for --from-registry (default: the node's socket)")
	fl.StringVar(&f.goal, "goal", "", "plan the execution of this method")
	fl.StringVar(&f.format, "format", "text", "output: text, dot, mermaid or json")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Second, "give up on each call to a live host after this long")
	return cmd
}

func runCompose(ctx context.Context, a cli.Env, f *composeFlags, args []string) error {
	switch f.format {
	case "text", "dot", "mermaid", "json":
	default:
		return cli.UsageErrorf("--format %q: want text, dot, mermaid or json", f.format)
	}
	if len(args) == 0 && !f.all && len(f.endpoints) == 0 && len(f.names) == 0 && !f.fromRegistry {
		return cli.UsageErrorf("give graph or capabilities files, --all, --endpoint, --name or --from-registry")
	}
	if f.registry != "" {
		f.fromRegistry = true
	}
	c := &compose.Composition{}
	for _, p := range args {
		if err := addComposeFile(c, p); err != nil {
			return err
		}
	}
	opts := &compose.LiveOptions{CallTimeout: f.timeout}
	if err := addLiveHosts(ctx, c, f, opts); err != nil {
		return err
	}
	if f.fromRegistry {
		if err := addRegistryHosts(ctx, c, f, opts); err != nil {
			return err
		}
	}
	if c.Name == "" {
		c.Name = "composition"
	}

	an := compose.Analyze(c)
	var plan *compose.Plan
	var planErr error
	if f.goal != "" {
		plan, planErr = c.Plan(f.goal)
	}
	if err := writeComposition(a, f.format, c, an, plan, planErr); err != nil {
		return err
	}
	if planErr != nil {
		fmt.Fprintf(a.Stderr(), "capmesh: no plan for %s: %v\n", f.goal, planErr)
	}
	if !an.OK() || planErr != nil {
		return cli.SilentExit(cli.ExitFailure)
	}
	return nil
}

// addComposeFile adds a deploy graph (.toml) or a list of
// capabilities.list answers (.json) to the composition.
func addComposeFile(c *compose.Composition, p string) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return cli.UsageErrorf("%v", err)
	}
	switch strings.ToLower(filepath.Ext(p)) {
	case ".toml":
		g, err := compose.ParseGraph(data)
		if err != nil {
			return cli.UsageErrorf("%s: %v", p, err)
		}
		if c.Name == "" {
			c.Name = g.Name
		}
		c.Nodes = append(c.Nodes, g.Nodes...)
		for _, h := range g.Hosts {
			c.Add(h)
		}
	case ".json":
		hosts, err := compose.ParseCapabilities(data)
		if err != nil {
			return cli.UsageErrorf("%s: %v", p, err)
		}
		for _, h := range hosts {
			c.Add(h)
		}
	default:
		return cli.UsageErrorf("%s: want a .toml deploy graph or a .json list of capabilities.list answers", p)
	}
	return nil
}

// addLiveHosts adds the hosts of the socket directory (--all) and the
// named ones (--endpoint, --name), asked live; a named host that cannot
// be reached exits 3.
func addLiveHosts(ctx context.Context, c *compose.Composition, f *composeFlags, opts *compose.LiveOptions) error {
	var addrs []endpoint.Address
	if f.all {
		dir := f.dir
		if dir == "" {
			d, _, err := endpoint.SocketDir()
			if err != nil {
				return cli.UsageErrorf("socket directory: %v", err)
			}
			dir = d
		}
		socks, _, err := conformance.Discover(dir)
		if err != nil {
			return cli.UsageErrorf("--all: %v", err)
		}
		for _, s := range socks {
			addrs = append(addrs, endpoint.Address{Scheme: "unix", Path: s.Path})
		}
	}
	scanned := len(addrs) // the rest are named: an unreachable one exits 3
	for _, e := range f.endpoints {
		addr, err := endpoint.Parse(e)
		if err != nil {
			return cli.UsageErrorf("--endpoint %q: %v", e, err)
		}
		addrs = append(addrs, addr)
	}
	for _, n := range f.names {
		p, err := endpoint.SocketPath(n)
		if err != nil {
			return cli.UsageErrorf("--name %q: %v", n, err)
		}
		addrs = append(addrs, endpoint.Address{Scheme: "unix", Path: p})
	}
	for i, h := range compose.FromEndpoints(ctx, addrs, opts) {
		if i >= scanned && !h.Live && ctx.Err() == nil {
			return cli.WithCode(cli.ExitNetwork, fmt.Errorf("%s: cannot reach the host, or it did not answer capabilities.list", h.Endpoint))
		}
		c.Add(h)
	}
	return nil
}

// addRegistryHosts adds the hosts the node's registry lists (--registry,
// else the capmesh socket).
func addRegistryHosts(ctx context.Context, c *compose.Composition, f *composeFlags, opts *compose.LiveOptions) error {
	addr := f.registry
	if addr == "" {
		p, err := endpoint.SocketPath("capmesh")
		if err != nil {
			return cli.UsageErrorf("%v", err)
		}
		addr = "unix://" + p
	}
	reg, err := endpoint.Dial(ctx, addr)
	if err != nil {
		return cli.NetErr(err)
	}
	// Another machine's registry names that machine's sockets.
	hosts, err := compose.FromRegistry(endpoint.RegistryAnswers(ctx, addr), reg, opts)
	reg.Close()
	if err != nil {
		return cli.NetErr(fmt.Errorf("%s: %w", addr, err))
	}
	for _, h := range hosts {
		c.Add(h)
	}
	return nil
}

// writeComposition prints the analysis (and the plan) in the format asked.
func writeComposition(a cli.Env, format string, c *compose.Composition, an *compose.Analysis, plan *compose.Plan, planErr error) error {
	switch format {
	case "json":
		out := map[string]any{"composition": c, "analysis": an, "ok": an.OK() && planErr == nil}
		if plan != nil {
			out["plan"] = plan
		}
		if planErr != nil {
			out["plan_error"] = planErr.Error()
		}
		enc := json.NewEncoder(a.Stdout())
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case "dot":
		return compose.WriteDOT(a.Stdout(), c, an)
	case "mermaid":
		return compose.WriteMermaid(a.Stdout(), c, an)
	}
	err := compose.WriteText(a.Stdout(), c, an)
	if err == nil && plan != nil {
		fmt.Fprintln(a.Stdout())
		err = compose.WritePlan(a.Stdout(), plan)
	}
	return err
}
