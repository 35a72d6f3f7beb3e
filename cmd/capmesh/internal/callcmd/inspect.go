package callcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/wire"
)

type inspectFlags struct {
	target       cli.Target
	asJSON       bool
	probeMethods bool
	order        string
	nodeID       string
}

// NewInspect is `capmesh inspect`: what a host says about itself, checked.
func NewInspect(a cli.Env) *cobra.Command {
	f := &inspectFlags{}
	cmd := &cobra.Command{
		Use:   "inspect [ENDPOINT | --socket PATH | --tcp HOST:PORT | --http URL | --name PRIMAL]",
		Short: "Show a host's identity, compliance level, methods, signature and transport security",
		Long: `inspect asks a host what the Capability Wire Standard lets any client ask —
capabilities.list (or its aliases capability.list and primal.capabilities),
identity.get and the health triad — and prints its identity, its compliance
level (1-3) with the reason for every missed requirement, its methods by
group, whether its signed announcement verifies, and its transport security.
It reads every capabilities.list format in use (A-E, the Level 2/3 envelope
and the quirks of real primals) and lists the departures it tolerated.

ENDPOINT is unix:///path, tcp://host:port, http://host:port/jsonrpc or a
socket path; without one, the flags select the host as for 'capmesh call'
(default: the capmesh node's socket).

Requirements that need more than these calls are reported as unknown: with
--probe-methods every advertised method is called with empty params to find
those answering "method not found" (a call may have side effects on the
host). --timeout bounds each call. The exit status is 0 when the host
answered, 2 for a usage error and 3 when it cannot be reached.`,
		Example: `  capmesh inspect unix:///run/user/1000/biomeos/rhizocrypt.sock
  capmesh inspect --name beardog --node-id node-1
  capmesh inspect tcp://127.0.0.1:9000 --json | jq .report.level`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd.Context(), a, f, args)
		},
	}
	f.target.Add(cmd)
	cmd.Flags().Lookup("timeout").Usage = "give up on each call after this long"
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the inspection as JSON")
	fl.BoolVar(&f.probeMethods, "probe-methods", false, "call every advertised method with empty params to check it exists (may have side effects)")
	fl.StringVar(&f.order, "order", "standard", "where to look for the method list first: standard (the Wire Standard's order), biomeos (what biomeOS does) or primalspring")
	fl.StringVar(&f.nodeID, "node-id", "", "node id of the host: report whether its announcement key is the forgeable seed-derived one")
	return cmd
}

func runInspect(ctx context.Context, a cli.Env, f *inspectFlags, args []string) error {
	var order wire.Order
	switch strings.ToLower(f.order) {
	case "standard":
		order = wire.OrderStandard
	case "biomeos":
		order = wire.OrderBiomeOS
	case "primalspring":
		order = wire.OrderPrimalSpring
	default:
		return cli.UsageErrorf("--order %q: want standard, biomeos or primalspring", f.order)
	}
	addr, err := inspectAddress(f, args)
	if err != nil {
		return err
	}
	c, err := endpoint.DialAddress(ctx, addr, nil)
	if err != nil {
		return cli.NetErr(err)
	}
	defer c.Close()
	transport := addr.Scheme
	if transport == "https" {
		transport = "http"
	}
	in, err := wire.Inspect(ctx, c, &wire.InspectOptions{
		Transport:    transport,
		CallTimeout:  f.target.Timeout,
		ProbeMethods: f.probeMethods,
		Order:        order,
	})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return cli.NetErr(fmt.Errorf("%s: %w", addr, err))
	}
	v := newInspectView(addr.String(), in, f.nodeID)
	if f.asJSON {
		enc := json.NewEncoder(a.Stdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	v.print(a.Stdout())
	return nil
}

// inspectAddress picks the endpoint: the argument, else the target flags.
func inspectAddress(f *inspectFlags, args []string) (endpoint.Address, error) {
	if len(args) == 0 {
		return f.target.Address()
	}
	if f.target.Socket != "" || f.target.TCP != "" || f.target.HTTP != "" || f.target.Name != "" {
		return endpoint.Address{}, cli.UsageErrorf("give the host either as ENDPOINT or with --socket/--tcp/--http/--name, not both")
	}
	addr, err := endpoint.Parse(args[0])
	if err != nil {
		return addr, cli.UsageErrorf("ENDPOINT %q: %v", args[0], err)
	}
	return addr, nil
}

// inspectView is what inspect prints; its JSON form is the --json output.
type inspectView struct {
	Endpoint          string                  `json:"endpoint"`
	Answered          string                  `json:"answered_by,omitempty"`
	CapabilitiesError string                  `json:"capabilities_error,omitempty"`
	Source            wire.Source             `json:"source,omitempty"`
	Detected          []wire.Source           `json:"formats,omitempty"`
	Primal            string                  `json:"primal,omitempty"`
	Version           string                  `json:"version,omitempty"`
	Identity          *wire.Identity          `json:"identity,omitempty"`
	IdentityError     string                  `json:"identity_error,omitempty"`
	Health            map[string]healthView   `json:"health"`
	Report            wire.Report             `json:"report"`
	Signature         *signatureView          `json:"signed_announcement"`
	TransportSecurity *wire.TransportSecurity `json:"transport_security"`
	Protocol          string                  `json:"protocol,omitempty"`
	Transport         []string                `json:"transport,omitempty"`
	Methods           []string                `json:"methods"`
	Groups            []groupView             `json:"groups"`
	Consumed          []string                `json:"consumed_capabilities,omitempty"`
	Deviations        []string                `json:"deviations"`
}

type healthView struct {
	State      string `json:"state,omitempty"`
	Status     string `json:"status,omitempty"`
	Conformant bool   `json:"conformant,omitempty"`
	Error      string `json:"error,omitempty"`
}

type signatureView struct {
	Valid          bool   `json:"valid"`
	Error          string `json:"error,omitempty"`
	PublicKey      string `json:"public_key,omitempty"`
	Encoding       string `json:"encoding,omitempty"`
	MethodsCovered bool   `json:"methods_covered,omitempty"`
	// DerivedKey is set when --node-id was given: true means the key is
	// the seed-derived one anyone can compute.
	DerivedKey *bool `json:"derived_key,omitempty"`
}

type groupView struct {
	Type    string   `json:"type"`
	Methods []string `json:"methods"`
}

func newInspectView(addr string, in *wire.Inspection, nodeID string) *inspectView {
	v := &inspectView{
		Endpoint:   addr,
		Answered:   in.Method,
		Health:     map[string]healthView{},
		Report:     in.Report,
		Methods:    []string{},
		Groups:     []groupView{},
		Deviations: []string{},
	}
	if err := in.Probe.CapabilitiesErr; err != nil {
		v.CapabilitiesError = err.Error()
	}
	if in.Identity != nil {
		v.Identity = in.Identity
	} else if id := in.Probe.Identity; id != nil && id.Err != nil {
		v.IdentityError = id.Err.Error()
	} else if id != nil {
		_, err := wire.ParseIdentity(id.Result)
		v.IdentityError = err.Error()
	}
	for m, call := range in.Probe.Health {
		if call.Err != nil {
			v.Health[m] = healthView{Error: call.Err.Error()}
			continue
		}
		r := in.Health[m]
		v.Health[m] = healthView{State: r.State.String(), Status: r.Status, Conformant: r.Conformant}
	}
	c := in.Capabilities
	if c == nil {
		return v
	}
	v.Source, v.Detected = c.Source, c.Detected
	v.Primal, v.Version = c.Primal, c.Version
	v.TransportSecurity, v.Protocol, v.Transport = c.TransportSecurity, c.Protocol, c.Transport
	if c.Methods != nil {
		v.Methods = c.Methods
	}
	v.Groups = displayGroups(c)
	for _, cc := range c.Consumed {
		v.Consumed = append(v.Consumed, cc.Name)
	}
	for _, d := range c.Deviations {
		v.Deviations = append(v.Deviations, d.String())
	}
	if a := in.Announcement; a != nil {
		s := &signatureView{}
		if a.Err != nil {
			s.Error = a.Err.Error()
		} else {
			s.Valid = true
			s.PublicKey = a.Verified.PublicKey.Hex()
			s.Encoding = a.Verified.Encoding
			s.MethodsCovered = a.Verified.MethodsCovered
			if nodeID != "" {
				derived := a.Verified.PublicKey.IsEcoPrimalsDerived(c.Primal, nodeID)
				s.DerivedKey = &derived
			}
		}
		v.Signature = s
	}
	return v
}

// displayGroups merges the host's groups by type (Songbird repeats types)
// and adds the methods no group names; without groups it groups the
// methods by domain.
func displayGroups(c *wire.Capabilities) []groupView {
	var out []groupView
	idx := map[string]int{}
	covered := map[string]bool{}
	add := func(typ string, methods []string) {
		i, ok := idx[typ]
		if !ok {
			i = len(out)
			idx[typ] = i
			out = append(out, groupView{Type: typ})
		}
		for _, m := range methods {
			if !slices.Contains(out[i].Methods, m) {
				out[i].Methods = append(out[i].Methods, m)
			}
			covered[m] = true
		}
	}
	for _, g := range c.Groups {
		add(g.Type, g.Methods)
	}
	if len(c.Groups) == 0 {
		for _, g := range wire.GroupByDomain(c.Methods) {
			full := make([]string, len(g.Methods))
			for i, m := range g.Methods {
				full[i] = g.Type + "." + m
			}
			add(g.Type, full)
		}
	}
	var rest []string
	for _, m := range c.Methods {
		if !covered[m] {
			rest = append(rest, m)
		}
	}
	if len(rest) > 0 {
		out = append(out, groupView{Type: "(ungrouped)", Methods: rest})
	}
	return out
}

// print writes the human-readable report.
func (v *inspectView) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, val string) { fmt.Fprintf(tw, "%s\t%s\n", k, val) }
	row("Endpoint", v.Endpoint)
	row("Capabilities", v.capabilitiesLine())
	row("Primal", orDash(strings.TrimSpace(v.Primal+" "+v.Version)))
	row("Identity", v.identityLine())
	row("Health", v.healthLine())
	row("Level", v.levelLine())
	row("Signature", v.signatureLine())
	row("Transport", v.transportLine())
	tw.Flush()
	v.printMethods(w)
	v.printRequirements(w)
	if len(v.Deviations) > 0 {
		fmt.Fprintf(w, "\nDeviations from the standard (tolerated)\n")
		for _, d := range v.Deviations {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
}

// capabilitiesLine says who answered capabilities.list and in which
// formats the method list was found.
func (v *inspectView) capabilitiesLine() string {
	switch {
	case v.Answered == "":
		return "no answer: " + v.CapabilitiesError
	case v.CapabilitiesError != "":
		return v.Answered + " answered, but: " + v.CapabilitiesError
	}
	formats := string(v.Source)
	if formats == "" {
		formats = "no method list found"
	}
	var also []string
	for _, s := range v.Detected {
		if s != v.Source {
			also = append(also, string(s))
		}
	}
	if len(also) > 0 {
		formats += "; also " + strings.Join(also, ", ")
	}
	return fmt.Sprintf("%s (read from %s)", v.Answered, formats)
}

// identityLine is what identity.get said, or why it failed.
func (v *inspectView) identityLine() string {
	if v.Identity == nil {
		return "identity.get: " + v.IdentityError
	}
	s := v.Identity.Primal + " " + v.Identity.Version
	if v.Identity.Domain != "" {
		s += ", domain " + v.Identity.Domain
	}
	if v.Identity.License != "" {
		s += ", license " + v.Identity.License
	}
	return s
}

// healthLine sums up the three health methods.
func (v *inspectView) healthLine() string {
	var hs []string
	for _, m := range []string{wire.MethodHealthLiveness, wire.MethodHealthReadiness, wire.MethodHealthCheck} {
		h := v.Health[m]
		short := strings.TrimPrefix(m, "health.")
		switch {
		case h.Error != "":
			hs = append(hs, short+" failed ("+h.Error+")")
		case h.Status != "":
			hs = append(hs, fmt.Sprintf("%s %s (%s)", short, h.State, h.Status))
		default:
			hs = append(hs, short+" "+h.State)
		}
	}
	return strings.Join(hs, " · ")
}

// levelLine is the level reached and, when some requirements were not
// observed, the level verified.
func (v *inspectView) levelLine() string {
	level := fmt.Sprintf("%d", v.Report.Level)
	if v.Report.Level != v.Report.Verified {
		n := len(v.Report.Unobserved())
		what := fmt.Sprintf("the %d unobserved requirements hold", n)
		if n == 1 {
			what = "the unobserved requirement holds"
		}
		level += fmt.Sprintf(" if %s (verified: %d)", what, v.Report.Verified)
	}
	return level
}

// printMethods writes the methods by group.
func (v *inspectView) printMethods(w io.Writer) {
	fmt.Fprintf(w, "\nMethods (%d)\n", len(v.Methods))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, g := range v.Groups {
		short := make([]string, len(g.Methods))
		for i, m := range g.Methods {
			short[i] = strings.TrimPrefix(m, g.Type+".")
		}
		lines := wrap(short, 72)
		fmt.Fprintf(tw, "  %s (%d)\t%s\n", g.Type, len(g.Methods), lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "  \t%s\n", l)
		}
	}
	tw.Flush()
}

// printRequirements writes every requirement with its outcome.
func (v *inspectView) printRequirements(w io.Writer) {
	fmt.Fprintln(w, "\nRequirements")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, ch := range v.Report.Checks {
		line := ch.Requirement
		if ch.Reason != "" {
			line += ": " + ch.Reason
		}
		if ch.ID == "L2.callable" && ch.Status == wire.Unknown {
			line += " (use --probe-methods)"
		}
		fmt.Fprintf(tw, "  %s\tL%d\t%s\n", ch.Status, ch.Level, line)
	}
	tw.Flush()
}

func (v *inspectView) signatureLine() string {
	s := v.Signature
	switch {
	case s == nil:
		return "none (no signed_announcement)"
	case !s.Valid:
		return "INVALID: " + s.Error
	}
	line := fmt.Sprintf("valid, ed25519 key %s (%s)", s.PublicKey, s.Encoding)
	if !s.MethodsCovered {
		line += ", covers primal and version only, not the methods"
	}
	if s.DerivedKey != nil && *s.DerivedKey {
		line += "; FORGEABLE: the key is derived from the primal name and node id"
	} else if s.DerivedKey != nil {
		line += "; not the seed-derived key"
	}
	return line
}

func (v *inspectView) transportLine() string {
	var parts []string
	if len(v.Transport) > 0 {
		parts = append(parts, strings.Join(v.Transport, ", "))
	}
	if v.Protocol != "" {
		parts = append(parts, "protocol "+v.Protocol)
	}
	ts := v.TransportSecurity
	switch {
	case ts == nil:
		parts = append(parts, "transport_security not advertised")
	case ts.BTSPRequired:
		parts = append(parts, "BTSP "+orDash(ts.BTSPVersion)+" handshake required")
	default:
		s := "BTSP not required"
		if ts.CleartextAvailable {
			s += ", cleartext accepted"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " · ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// wrap joins words with ", " into lines of at most width bytes (a longer
// word gets a line of its own).
func wrap(words []string, width int) []string {
	if len(words) == 0 {
		return []string{""}
	}
	var lines []string
	cur := ""
	for i, w := range words {
		sep := ""
		if i < len(words)-1 {
			sep = ","
		}
		switch {
		case cur == "":
			cur = w + sep
		case len(cur)+1+len(w)+len(sep) > width:
			lines = append(lines, cur)
			cur = w + sep
		default:
			cur += " " + w + sep
		}
	}
	return append(lines, cur)
}
