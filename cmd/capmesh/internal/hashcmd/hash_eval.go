package hashcmd

import (
	"fmt"
	"text/tabwriter"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/fingerprint"
)

// evaluatedTool is one enabled tool in `hash evaluate --json`.
type evaluatedTool struct {
	Name     string           `json:"name"`
	BaseHash string           `json:"baseHash"`
	Static   bool             `json:"static"`
	Binding  *canonical.Value `json:"runtimeBinding,omitempty"`
	ToolHash string           `json:"toolHash"`
}

func newHashEvaluateCmd(a cli.Env, f *hashFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "evaluate FILE",
		Short: "an agent's evaluation: enabled tools, their hashes and the evaluated instructions",
		Long: `evaluate evaluates the agent of a link-input document (or an agent
declaration) like computeFullCapabilityLink and shows, for each enabled tool
in runtime order, its base hash (the static hash, or the hash of its
evaluated spec for a tool a dynamic toolkit created), its runtime binding
from runtimeToolAugments and the tool hash the runtime hash commits to;
then the runtime hash and the evaluated instructions (which are not hashed).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.payload {
				return cli.UsageErrorf("--payload does not apply to evaluate; use hash runtime")
			}
			v, err := cli.ReadDoc(a, args[0])
			if err != nil {
				return err
			}
			root, augments, err := evaluateInput(v)
			if err != nil {
				return cli.UsageErrorf("%s: %v", args[0], err)
			}
			r, ev, err := fingerprint.EvaluatedRuntime(root, augments)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			ths, err := r.ToolHashes()
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			rh, err := r.Hash()
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			tools := make([]evaluatedTool, len(ths))
			for i, t := range ths {
				tools[i] = evaluatedTool{t.Name, t.BaseHash, t.Static, t.Augment, t.ToolHash}
			}
			if f.asJSON {
				return cli.WriteJSON(a.Stdout(), map[string]any{
					"enabledTools": ev.Names(), "tools": tools, "runtimeHash": rh, "instructions": ev.Instructions,
				})
			}
			tw := tabwriter.NewWriter(a.Stdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOOL\tBASE\tFROM\tBINDING\tTOOL HASH")
			for _, t := range tools {
				from, binding := "static", ""
				if !t.Static {
					from = "evaluated spec"
				}
				if t.Binding != nil {
					b, err := t.Binding.MarshalJSON()
					if err != nil {
						return err
					}
					binding = string(b)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, fingerprint.FormatHashShort(t.BaseHash), from, binding, fingerprint.FormatHashShort(t.ToolHash))
			}
			tw.Flush()
			fmt.Fprintf(a.Stdout(), "\nruntimeHash %s\n", rh)
			if ev.Instructions != "" {
				fmt.Fprintf(a.Stdout(), "\ninstructions:\n%s\n", ev.Instructions)
			}
			return nil
		},
	}
}

// evaluateInput reads the root and augments of a link-input document, or
// the root of a bare agent declaration.
func evaluateInput(v canonical.Value) (fingerprint.Composable, map[string]canonical.Value, error) {
	if v.Kind == canonical.Object && hasKey(v, "rootComposable") {
		ag, err := fingerprint.DecodeAgent(v)
		if err != nil {
			return nil, nil, err
		}
		return ag.Root, nil, nil
	}
	in, err := fingerprint.DecodeLinkInput(v)
	if err != nil {
		return nil, nil, err
	}
	if in.Evaluate == nil {
		return nil, nil, fmt.Errorf("the document states a runtime (graph, enabledToolNames, nameToStaticHash or toolsFallback) or has no agent declaration: nothing to evaluate")
	}
	return in.Evaluate, in.Runtime.Augments, nil
}

func newHashBindingCmd(a cli.Env, f *hashFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "binding BASE VALUE",
		Short: "the runtime tool binding hash of a tool hash and its runtimeToolAugments value",
		Long: `binding computes hashRuntimeToolBinding(BASE, VALUE): the hash a runtime
commits to for a tool whose static (or evaluated) hash is BASE and whose
runtimeToolAugments entry is the string VALUE.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			base, value := args[0], canonical.Value{Kind: canonical.String, Str: args[1]}
			h, err := fingerprint.ToolBindingHash(base, value)
			if err != nil {
				return err
			}
			if f.payload {
				p, err := fingerprint.ToolBindingPayload(base, value)
				if err != nil {
					return err
				}
				b, err := canonical.Khoralabs.AppendCanonical(nil, p)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.Stdout(), "%s\n", b)
				return nil
			}
			if f.asJSON {
				return cli.WriteJSON(a.Stdout(), map[string]any{"hash": h, "baseToolHash": base, "runtimeBinding": args[1]})
			}
			fmt.Fprintln(a.Stdout(), h)
			return nil
		},
	}
}

func newHashToolRefsCmd(a cli.Env, f *hashFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "toolrefs A B",
		Short: "diffToolRefs of two links, link inputs or toolRefs arrays",
		Long: `toolrefs computes diffToolRefs(A's toolRefs, B's toolRefs): the tools only in
A, only in B, and present in both with different hashes, in the order of the
reference (nothing is sorted; a repeated toolKey keeps its first position
and last hash). Each of A and B is a capability link document, a link-input
document (its link is computed first) or a JSON array of {toolKey, toolHash}.
It exits 1 when the refs differ, like diff(1).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.payload {
				return cli.UsageErrorf("--payload does not apply to a diff")
			}
			var sides [2][]fingerprint.ToolRef
			for i, p := range args {
				v, err := cli.ReadDoc(a, p)
				if err != nil {
					return err
				}
				if sides[i], err = toolRefsOf(v); err != nil {
					return cli.UsageErrorf("%s: %v", p, err)
				}
			}
			d := fingerprint.DiffToolRefs(sides[0], sides[1])
			same := len(d.OnlyInFirst)+len(d.OnlyInSecond)+len(d.HashChanged) == 0
			if f.asJSON {
				if err := cli.WriteJSON(a.Stdout(), d); err != nil {
					return err
				}
			} else {
				printToolRefsDiff(a, d)
				if same {
					fmt.Fprintln(a.Stdout(), "Same tool refs.")
				}
			}
			if !same {
				return cli.SilentExit(1)
			}
			return nil
		},
	}
}

// toolRefsOf returns the tool refs of a toolRefs array, a link document or
// a link-input document.
func toolRefsOf(v canonical.Value) ([]fingerprint.ToolRef, error) {
	if v.Kind == canonical.Array {
		return fingerprint.DecodeToolRefs(v)
	}
	if v.Kind == canonical.Object && hasKey(v, "agent") {
		in, err := fingerprint.DecodeLinkInput(v)
		if err != nil {
			return nil, err
		}
		l, err := fingerprint.CreateCapabilityLink(*in)
		if err != nil {
			return nil, err
		}
		return l.ToolRefs, nil
	}
	l, err := fingerprint.DecodeLink(v)
	if err != nil {
		return nil, err
	}
	return l.ToolRefs, nil
}

func hasKey(v canonical.Value, key string) bool {
	_, ok := v.Get(key)
	return ok
}
