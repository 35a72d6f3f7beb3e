package hashcmd

import (
	"fmt"
	"text/tabwriter"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/fingerprint"
)

// hashFlags are shared by the hash subcommands.
type hashFlags struct {
	payload   bool
	asJSON    bool
	allowlist []string
}

// New is `capmesh hash`: the capability fingerprints of documents, their
// links, diffs, evaluations and bindings.
func New(a cli.Env) *cobra.Command {
	f := &hashFlags{}
	h := &hashCmds{a: a, f: f}
	cmd := &cobra.Command{
		Use:   "hash",
		Short: "Capability fingerprints compatible with @khoralabs/agent-capabilities",
		Long:  hashLong,
	}
	pf := cmd.PersistentFlags()
	pf.BoolVar(&f.payload, "payload", false, "print the canonical pre-hash JSON instead of the hash")
	pf.BoolVar(&f.asJSON, "json", false, "print a JSON result (for scripts)")
	cmd.AddCommand(
		h.one("object", "hashPlainObject of any JSON document", h.object),
		h.one("tool", "static hash of a tool declaration", h.composable("tool")),
		h.one("toolkit", "static hash of a toolkit or dynamicToolkit declaration", h.composable("toolkit")),
		h.one("agent", "staticHash of a registered agent declaration", h.agent),
		h.one("runtime", "computeRuntimeHash of a runtime document", h.runtime),
	)
	inv := h.one("invocation", "invocation context hash", h.invocation)
	inv.Flags().StringSliceVar(&f.allowlist, "allowlist", nil, "top-level context keys to keep (comma-separated)")
	cmd.AddCommand(inv, newHashLinkCmd(a, f), newHashDiffCmd(a, f),
		newHashEvaluateCmd(a, f), newHashBindingCmd(a, f), newHashToolRefsCmd(a, f))
	return cmd
}

// hashLong is capmesh hash's help.
const hashLong = `hash computes the SHA-256 capability fingerprints that
@khoralabs/agent-capabilities computes in TypeScript, from JSON declarations
(the format of its test vectors; see the fingerprint package documentation).
A link input that declares only the agent is evaluated like
computeFullCapabilityLink: policies state their outcome ({"id":"p",
"allow":false}; absent allow allows) and a dynamicToolkit lists the members
its create() returns under "create".
FILE may be - for standard input.

  capmesh hash object FILE       hashPlainObject of any JSON document
  capmesh hash tool FILE         a tool() declaration's static hash
  capmesh hash toolkit FILE      a toolkit or dynamicToolkit declaration
  capmesh hash agent FILE        a registered agent's staticHash
  capmesh hash runtime FILE      computeRuntimeHash of a runtime document
  capmesh hash invocation FILE   the invocation context hash (--allowlist)
  capmesh hash link A [B]        capability links of link-input documents, and what changed
  capmesh hash diff A B          what changed between two capability link documents
  capmesh hash evaluate FILE     an agent's evaluation: enabled tools, their hashes, instructions
  capmesh hash binding BASE V    the runtime tool binding hash of one runtimeToolAugments entry
  capmesh hash toolrefs A B      diffToolRefs of two links (or link inputs, or toolRefs arrays)

JSON cannot carry every JavaScript value; write {"$undefined":true},
{"$function":"f"}, {"$date":"2024-01-02T03:04:05.000Z"}, {"$number":"-0"}
and {"$literal":{...}} for those.`

// hashCmds builds the subcommands of capmesh hash that read one document.
type hashCmds struct {
	a cli.Env
	f *hashFlags
}

// one is a subcommand that reads the JSON document FILE and runs run on it.
func (h *hashCmds) one(use, short string, run func(cmd *cobra.Command, v canonical.Value) error) *cobra.Command {
	return &cobra.Command{
		Use:   use + " FILE",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := cli.ReadDoc(h.a, args[0])
			if err != nil {
				return err
			}
			return run(cmd, v)
		},
	}
}

// emit prints a hash: the payload with --payload, a JSON object with the
// extra members with --json, else the hash alone.
func (h *hashCmds) emit(payload canonical.Value, hash string, extra map[string]any) error {
	if h.f.payload {
		b, err := canonical.Khoralabs.AppendCanonical(nil, payload)
		if err != nil {
			return err
		}
		fmt.Fprintf(h.a.Stdout(), "%s\n", b)
		return nil
	}
	if h.f.asJSON {
		out := map[string]any{"hash": hash}
		for k, v := range extra {
			out[k] = v
		}
		return cli.WriteJSON(h.a.Stdout(), out)
	}
	fmt.Fprintln(h.a.Stdout(), hash)
	return nil
}

// composable hashes a tool or toolkit declaration; want names the
// subcommand, which must match what the document declares.
func (h *hashCmds) composable(want string) func(*cobra.Command, canonical.Value) error {
	return func(_ *cobra.Command, v canonical.Value) error {
		c, err := fingerprint.DecodeComposable(v)
		if err != nil {
			return cli.UsageErrorf("%v", err)
		}
		var p canonical.Value
		switch t := c.(type) {
		case *fingerprint.Tool:
			if want != "tool" {
				return cli.UsageErrorf("the document declares a tool; use capmesh hash tool")
			}
			p, err = t.StaticPayload()
		case *fingerprint.Toolkit:
			if want != "toolkit" {
				return cli.UsageErrorf("the document declares a toolkit; use capmesh hash toolkit")
			}
			p, err = t.StaticPayload()
		case *fingerprint.DynamicToolkit:
			if want != "toolkit" {
				return cli.UsageErrorf("the document declares a dynamicToolkit; use capmesh hash toolkit")
			}
			p, err = t.StaticPayload()
		}
		if err != nil {
			return err
		}
		hash, err := c.StaticHash()
		if err != nil {
			return err
		}
		return h.emit(p, hash, map[string]any{"kind": want, "name": c.ComposableName()})
	}
}

// object is capmesh hash object: hashPlainObject.
func (h *hashCmds) object(_ *cobra.Command, v canonical.Value) error {
	p, ok, err := fingerprint.Plain(v)
	if err != nil {
		return err
	}
	if !ok {
		if h.f.payload {
			return nil // JSON.stringify returns undefined: nothing is hashed
		}
		return h.emit(p, fingerprint.EmptyHash, nil)
	}
	hash, err := fingerprint.HashPlainObject(v)
	if err != nil {
		return err
	}
	return h.emit(p, hash, nil)
}

// agent is capmesh hash agent: a registered agent's staticHash.
func (h *hashCmds) agent(_ *cobra.Command, v canonical.Value) error {
	ag, err := fingerprint.DecodeAgent(v)
	if err != nil {
		return cli.UsageErrorf("%v", err)
	}
	p, err := ag.StaticPayload()
	if err != nil {
		return err
	}
	hash, err := ag.StaticHash()
	if err != nil {
		return err
	}
	return h.emit(p, hash, map[string]any{"agentId": ag.AgentID})
}

// runtime is capmesh hash runtime: computeRuntimeHash.
func (h *hashCmds) runtime(_ *cobra.Command, v canonical.Value) error {
	r, err := fingerprint.DecodeRuntime(v)
	if err != nil {
		return cli.UsageErrorf("%v", err)
	}
	refs, err := r.ToolRefs()
	if err != nil {
		return err
	}
	p := fingerprint.RuntimePayload(refs)
	hash, err := r.Hash()
	if err != nil {
		return err
	}
	return h.emit(p, hash, map[string]any{"toolRefs": refs})
}

// invocation is capmesh hash invocation: the invocation context hash.
func (h *hashCmds) invocation(_ *cobra.Command, v canonical.Value) error {
	ctx, ok, err := fingerprint.NormalizeInvocationContext(v, h.f.allowlist)
	if err != nil {
		return err
	}
	if !ok {
		if h.f.asJSON {
			return cli.WriteJSON(h.a.Stdout(), map[string]any{"hash": nil})
		}
		fmt.Fprintln(h.a.Stderr(), "capmesh: no invocation hash: the context is not a plain object or is empty after normalization")
		return cli.SilentExit(1)
	}
	p := fingerprint.InvocationPayload(ctx)
	hash, _, err := fingerprint.InvocationHash(v, h.f.allowlist)
	if err != nil {
		return err
	}
	return h.emit(p, hash, nil)
}

func newHashLinkCmd(a cli.Env, f *hashFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "link A [B]",
		Short: "capability link of a link-input document; with B, what changed",
		Long: `link computes createCapabilityLink for each link-input document (an agent
declaration or {agentId,name,staticHash} under "agent", plus the runtime
fields enabledToolNames, nameToStaticHash or graph, toolsFallback,
runtimeToolAugments, and optionally invocationContext and
invocationContextAllowlist). A document with an agent declaration and none
of graph, enabledToolNames, nameToStaticHash and toolsFallback is evaluated
like computeFullCapabilityLink: only the tools whose policies all allow
("allow":false denies) are enabled, with the members each dynamicToolkit
lists under "create". With a graph but no enabledToolNames every tool of the
graph is enabled, as if every policy allowed. With two documents it shows
what changed between the two links.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var links []*fingerprint.CapabilityLink
			for _, p := range args {
				v, err := cli.ReadDoc(a, p)
				if err != nil {
					return err
				}
				in, err := fingerprint.DecodeLinkInput(v)
				if err != nil {
					return cli.UsageErrorf("%s: %v", p, err)
				}
				l, err := fingerprint.CreateCapabilityLink(*in)
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				links = append(links, l)
			}
			if len(links) == 1 {
				if f.payload {
					return cli.UsageErrorf("--payload: a link has no single payload; use hash runtime/agent/invocation")
				}
				return cli.WriteJSON(a.Stdout(), links[0])
			}
			return printLinkDiff(a, f, links[0], links[1])
		},
	}
}

func newHashDiffCmd(a cli.Env, f *hashFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "what changed between two capability link documents",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var links []*fingerprint.CapabilityLink
			for _, p := range args {
				v, err := cli.ReadDoc(a, p)
				if err != nil {
					return err
				}
				l, err := fingerprint.DecodeLink(v)
				if err != nil {
					return cli.UsageErrorf("%s: %v", p, err)
				}
				links = append(links, l)
			}
			return printLinkDiff(a, f, links[0], links[1])
		},
	}
}

// printLinkDiff prints diffCapabilityLinks, diffToolRefs and the
// explanation as a table, or as JSON with --json. It exits 1 when the links
// differ, like diff(1).
func printLinkDiff(a cli.Env, f *hashFlags, x, y *fingerprint.CapabilityLink) error {
	if f.payload {
		return cli.UsageErrorf("--payload does not apply to a diff")
	}
	ld := fingerprint.DiffCapabilityLinks(x, y)
	td := fingerprint.DiffToolRefs(x.ToolRefs, y.ToolRefs)
	why := fingerprint.ExplainCapabilityLinkRelationship(x, y)
	same := len(ld.Changed) == 0 && len(td.OnlyInFirst)+len(td.OnlyInSecond)+len(td.HashChanged) == 0
	if f.asJSON {
		if err := cli.WriteJSON(a.Stdout(), map[string]any{
			"same": same, "explanation": why, "links": ld, "toolRefs": td, "first": x, "second": y,
		}); err != nil {
			return err
		}
	} else {
		show := func(s *string) string {
			if s == nil {
				return "(none)"
			}
			return fingerprint.FormatHashShort(*s)
		}
		tw := tabwriter.NewWriter(a.Stdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FIELD\tSTATUS\tFIRST\tSECOND")
		changed := map[string]fingerprint.FieldChange{}
		for _, c := range ld.Changed {
			changed[c.Field] = c
		}
		for _, name := range fingerprint.LinkFields {
			if c, ok := changed[name]; ok {
				fmt.Fprintf(tw, "%s\tchanged\t%s\t%s\n", name, show(c.First), show(c.Second))
			} else {
				fmt.Fprintf(tw, "%s\tsame\t\t\n", name)
			}
		}
		tw.Flush()
		if n := len(td.OnlyInFirst) + len(td.OnlyInSecond) + len(td.HashChanged); n > 0 {
			fmt.Fprintln(a.Stdout())
			printToolRefsDiff(a, td)
		}
		fmt.Fprintf(a.Stdout(), "\n%s\n", why)
	}
	if !same {
		return cli.SilentExit(1)
	}
	return nil
}

// printToolRefsDiff prints a diffToolRefs result as a table, in the
// reference's order (removed, added, hash changed); nothing when empty.
func printToolRefsDiff(a cli.Env, td fingerprint.ToolRefsDiff) {
	if len(td.OnlyInFirst)+len(td.OnlyInSecond)+len(td.HashChanged) == 0 {
		return
	}
	tw := tabwriter.NewWriter(a.Stdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tCHANGE\tFIRST\tSECOND")
	for _, r := range td.OnlyInFirst {
		fmt.Fprintf(tw, "%s\tremoved\t%s\t\n", r.ToolKey, fingerprint.FormatHashShort(r.ToolHash))
	}
	for _, r := range td.OnlyInSecond {
		fmt.Fprintf(tw, "%s\tadded\t\t%s\n", r.ToolKey, fingerprint.FormatHashShort(r.ToolHash))
	}
	for _, r := range td.HashChanged {
		fmt.Fprintf(tw, "%s\thash changed\t%s\t%s\n", r.ToolKey, fingerprint.FormatHashShort(r.FirstHash), fingerprint.FormatHashShort(r.SecondHash))
	}
	tw.Flush()
}
