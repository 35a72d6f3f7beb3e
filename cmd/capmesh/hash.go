package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/fingerprint"
)

func init() { register(newHashCmd) }

// hashFlags are shared by the hash subcommands.
type hashFlags struct {
	payload   bool
	asJSON    bool
	allowlist []string
}

func newHashCmd(a *app) *cobra.Command {
	f := &hashFlags{}
	cmd := &cobra.Command{
		Use:   "hash",
		Short: "Capability fingerprints compatible with @khoralabs/agent-capabilities",
		Long: `hash computes the SHA-256 capability fingerprints that
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
and {"$literal":{...}} for those.`,
	}
	pf := cmd.PersistentFlags()
	pf.BoolVar(&f.payload, "payload", false, "print the canonical pre-hash JSON instead of the hash")
	pf.BoolVar(&f.asJSON, "json", false, "print a JSON result (for scripts)")
	one := func(use, short string, run func(cmd *cobra.Command, v canonical.Value) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " FILE",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				v, err := readDoc(a, args[0])
				if err != nil {
					return err
				}
				return run(cmd, v)
			},
		}
	}
	emit := func(payload canonical.Value, hash string, extra map[string]any) error {
		if f.payload {
			b, err := canonical.Khoralabs.AppendCanonical(nil, payload)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s\n", b)
			return nil
		}
		if f.asJSON {
			out := map[string]any{"hash": hash}
			for k, v := range extra {
				out[k] = v
			}
			return writeJSON(a.stdout, out)
		}
		fmt.Fprintln(a.stdout, hash)
		return nil
	}
	composable := func(want string) func(*cobra.Command, canonical.Value) error {
		return func(_ *cobra.Command, v canonical.Value) error {
			c, err := fingerprint.DecodeComposable(v)
			if err != nil {
				return usageErrorf("%v", err)
			}
			var p canonical.Value
			switch t := c.(type) {
			case *fingerprint.Tool:
				if want != "tool" {
					return usageErrorf("the document declares a tool; use capmesh hash tool")
				}
				p, err = t.StaticPayload()
			case *fingerprint.Toolkit:
				if want != "toolkit" {
					return usageErrorf("the document declares a toolkit; use capmesh hash toolkit")
				}
				p, err = t.StaticPayload()
			case *fingerprint.DynamicToolkit:
				if want != "toolkit" {
					return usageErrorf("the document declares a dynamicToolkit; use capmesh hash toolkit")
				}
				p, err = t.StaticPayload()
			}
			if err != nil {
				return err
			}
			h, err := c.StaticHash()
			if err != nil {
				return err
			}
			return emit(p, h, map[string]any{"kind": want, "name": c.ComposableName()})
		}
	}
	cmd.AddCommand(
		one("object", "hashPlainObject of any JSON document", func(_ *cobra.Command, v canonical.Value) error {
			p, ok, err := fingerprint.Plain(v)
			if err != nil {
				return err
			}
			if !ok {
				if f.payload {
					return nil // JSON.stringify returns undefined: nothing is hashed
				}
				return emit(p, fingerprint.EmptyHash, nil)
			}
			h, err := fingerprint.HashPlainObject(v)
			if err != nil {
				return err
			}
			return emit(p, h, nil)
		}),
		one("tool", "static hash of a tool declaration", composable("tool")),
		one("toolkit", "static hash of a toolkit or dynamicToolkit declaration", composable("toolkit")),
		one("agent", "staticHash of a registered agent declaration", func(_ *cobra.Command, v canonical.Value) error {
			ag, err := fingerprint.DecodeAgent(v)
			if err != nil {
				return usageErrorf("%v", err)
			}
			p, err := ag.StaticPayload()
			if err != nil {
				return err
			}
			h, err := ag.StaticHash()
			if err != nil {
				return err
			}
			return emit(p, h, map[string]any{"agentId": ag.AgentID})
		}),
		one("runtime", "computeRuntimeHash of a runtime document", func(_ *cobra.Command, v canonical.Value) error {
			r, err := fingerprint.DecodeRuntime(v)
			if err != nil {
				return usageErrorf("%v", err)
			}
			refs, err := r.ToolRefs()
			if err != nil {
				return err
			}
			p := fingerprint.RuntimePayload(refs)
			h, err := r.Hash()
			if err != nil {
				return err
			}
			return emit(p, h, map[string]any{"toolRefs": refs})
		}),
	)
	inv := one("invocation", "invocation context hash", func(_ *cobra.Command, v canonical.Value) error {
		ctx, ok, err := fingerprint.NormalizeInvocationContext(v, f.allowlist)
		if err != nil {
			return err
		}
		if !ok {
			if f.asJSON {
				return writeJSON(a.stdout, map[string]any{"hash": nil})
			}
			fmt.Fprintln(a.stderr, "capmesh: no invocation hash: the context is not a plain object or is empty after normalization")
			return silentExit(1)
		}
		p := fingerprint.InvocationPayload(ctx)
		h, _, err := fingerprint.InvocationHash(v, f.allowlist)
		if err != nil {
			return err
		}
		return emit(p, h, nil)
	})
	inv.Flags().StringSliceVar(&f.allowlist, "allowlist", nil, "top-level context keys to keep (comma-separated)")
	cmd.AddCommand(inv, newHashLinkCmd(a, f), newHashDiffCmd(a, f),
		newHashEvaluateCmd(a, f), newHashBindingCmd(a, f), newHashToolRefsCmd(a, f))
	return cmd
}

func newHashLinkCmd(a *app, f *hashFlags) *cobra.Command {
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
				v, err := readDoc(a, p)
				if err != nil {
					return err
				}
				in, err := fingerprint.DecodeLinkInput(v)
				if err != nil {
					return usageErrorf("%s: %v", p, err)
				}
				l, err := fingerprint.CreateCapabilityLink(*in)
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				links = append(links, l)
			}
			if len(links) == 1 {
				if f.payload {
					return usageErrorf("--payload: a link has no single payload; use hash runtime/agent/invocation")
				}
				return writeJSON(a.stdout, links[0])
			}
			return printLinkDiff(a, f, links[0], links[1])
		},
	}
}

func newHashDiffCmd(a *app, f *hashFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "what changed between two capability link documents",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var links []*fingerprint.CapabilityLink
			for _, p := range args {
				v, err := readDoc(a, p)
				if err != nil {
					return err
				}
				l, err := fingerprint.DecodeLink(v)
				if err != nil {
					return usageErrorf("%s: %v", p, err)
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
func printLinkDiff(a *app, f *hashFlags, x, y *fingerprint.CapabilityLink) error {
	if f.payload {
		return usageErrorf("--payload does not apply to a diff")
	}
	ld := fingerprint.DiffCapabilityLinks(x, y)
	td := fingerprint.DiffToolRefs(x.ToolRefs, y.ToolRefs)
	why := fingerprint.ExplainCapabilityLinkRelationship(x, y)
	same := len(ld.Changed) == 0 && len(td.OnlyInFirst)+len(td.OnlyInSecond)+len(td.HashChanged) == 0
	if f.asJSON {
		if err := writeJSON(a.stdout, map[string]any{
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
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
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
			fmt.Fprintln(a.stdout)
			printToolRefsDiff(a, td)
		}
		fmt.Fprintf(a.stdout, "\n%s\n", why)
	}
	if !same {
		return silentExit(1)
	}
	return nil
}

// printToolRefsDiff prints a diffToolRefs result as a table, in the
// reference's order (removed, added, hash changed); nothing when empty.
func printToolRefsDiff(a *app, td fingerprint.ToolRefsDiff) {
	if len(td.OnlyInFirst)+len(td.OnlyInSecond)+len(td.HashChanged) == 0 {
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
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

// readDoc reads one JSON document from path ("-" is standard input) with
// the order-preserving reader, so collation ties keep document order.
func readDoc(a *app, path string) (canonical.Value, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(a.stdin, 64<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return canonical.Value{}, usageErrorf("%v", err)
		}
		return canonical.Value{}, err
	}
	v, err := canonical.Parse(data)
	if err != nil {
		name := path
		if path == "-" {
			name = "stdin"
		}
		return canonical.Value{}, usageErrorf("%s: %v", name, strings.TrimPrefix(err.Error(), "canonical: "))
	}
	return v, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
