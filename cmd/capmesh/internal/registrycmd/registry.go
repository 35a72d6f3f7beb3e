package registrycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// New is `capmesh registry`: list, find and watch the node's providers,
// revoke, enroll and invite.
func New(a cli.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "List, find and watch a node's providers; enrol and revoke node keys",
		Long: `registry talks to a capmesh node (by default the local one, on its socket
in the biomeos directory; --socket, --tcp or --http select another) through
its JSON-RPC registry methods: ipc.list, ipc.find_capability and ipc.watch
for everyone, and the operator methods registry.enroll, registry.invite and
registry.revoke, which a node accepts only over its Unix socket from its own
user.

Tables are for people; --json prints the node's answer for scripts. A node
that cannot be reached exits 3, a refusal exits 1 with its code.`,
	}
	cmd.AddCommand(newRegistryListCmd(a), newRegistryFindCmd(a), newRegistryWatchCmd(a),
		newRegistryRevokeCmd(a), newRegistryEnrollCmd(a), newRegistryInviteCmd(a))
	return cmd
}

// registryCall calls method on the node selected by t and decodes the
// result into out. JSON-RPC refusals become errors that name the node's
// word for them; transport failures exit 3.
func registryCall(ctx context.Context, t *cli.Target, method string, params, out any) error {
	addr, err := t.Address()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	c, err := endpoint.DialAddress(ctx, addr, nil)
	if err != nil {
		return cli.NetErr(err)
	}
	defer c.Close()
	if err := c.Call(ctx, method, params, out); err != nil {
		return registryErr(addr, method, err)
	}
	return nil
}

// registryErr words an error from the node: a JSON-RPC refusal with the
// reference word the node put in error.data.code, or a network error.
func registryErr(addr endpoint.Address, method string, err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		var data struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(je.Data, &data)
		msg := je.Message
		if data.Code != "" {
			msg = data.Code + ": " + msg
		}
		if je.Code == jsonrpc.MethodNotFound {
			msg += " (is this a capmesh node?)"
		}
		return fmt.Errorf("%s: %s (JSON-RPC %d)", method, msg, je.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return cli.WithCode(cli.ExitNetwork, fmt.Errorf("%s: no reply from %s within the timeout", method, addr))
	}
	return cli.NetErr(fmt.Errorf("%s: %s: %w", method, addr, err))
}

// provider is the part of the node's provider record the tables show.
type provider struct {
	PrimalID     string           `json:"primal_id"`
	Key          string           `json:"key"`
	Capabilities []string         `json:"capabilities"`
	Endpoint     string           `json:"endpoint"`
	Source       string           `json:"source"`
	ExpiresAt    time.Time        `json:"expires_at"`
	Trust        registry.Verdict `json:"trust"`
}

func printJSON(w io.Writer, raw json.RawMessage) {
	fmt.Fprintln(w, cli.IndentJSON(raw))
}

// printProviders writes one row per provider.
func printProviders(w io.Writer, ps []provider, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKEY\tCAPABILITIES\tENDPOINT\tSOURCE\tEXPIRES\tTRUST")
	for _, p := range ps {
		key := "-"
		if p.Source == registry.SourceDescriptor {
			key = shortKey(p.Key)
		}
		trust := "trusted"
		if !p.Trust.Trusted {
			trust = "UNTRUSTED: " + p.Trust.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.PrimalID, key, strings.Join(p.Capabilities, ","), p.Endpoint, p.Source, expiresIn(p.ExpiresAt, now), trust)
	}
	tw.Flush()
}

func shortKey(k string) string {
	if len(k) > 12 {
		return k[:12] + "…"
	}
	return k
}

// expiresIn renders an expiry for the table: relative within a week,
// else its UTC date (a duration past 2262 does not fit a time.Duration).
// Another fleet node's local registration has no expiry of its own
// (descriptor.NodeLease): it lives as long as the lease of the node that
// admitted it.
func expiresIn(t, now time.Time) string {
	if descriptor.HeldByNode(t) {
		return "with its node"
	}
	if t.After(now.Add(7 * 24 * time.Hour)) {
		return "on " + t.UTC().Format(time.DateOnly)
	}
	d := t.Sub(now)
	if d <= 0 {
		return "expired"
	}
	return "in " + d.Round(time.Second).String()
}

func newRegistryListCmd(a cli.Env) *cobra.Command {
	t := &cli.Target{}
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the node's live providers",
		Long: `list prints every live registration the node holds: local (unsigned,
same-user) registrations and signed RFC-005 descriptors. Only trusted
providers are shown unless --all, which adds the ones the trust policy
refuses, with the reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res json.RawMessage
			if err := registryCall(cmd.Context(), t, "ipc.list", map[string]any{"include_untrusted": all}, &res); err != nil {
				return err
			}
			if asJSON {
				printJSON(a.Stdout(), res)
				return nil
			}
			var out struct {
				Services []provider `json:"services"`
				Revision uint64     `json:"revision"`
			}
			if err := json.Unmarshal(res, &out); err != nil {
				return fmt.Errorf("ipc.list: unexpected answer: %w", err)
			}
			if len(out.Services) == 0 {
				fmt.Fprintf(a.Stderr(), "no live providers (registry revision %d)\n", out.Revision)
				return nil
			}
			printProviders(a.Stdout(), out.Services, time.Now())
			return nil
		},
	}
	t.Add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the node's answer as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "include providers the trust policy refuses")
	return cmd
}

func newRegistryFindCmd(a cli.Env) *cobra.Command {
	t := &cli.Target{}
	var asJSON, all bool
	var limit int
	cmd := &cobra.Command{
		Use:   "find CAPABILITY",
		Short: "Find the live, trusted providers of a capability",
		Long: `find asks the node for the providers of one capability tag (exact,
case-sensitive match), newest registration first. It exits 1 when there is
none, so scripts can test for a provider.`,
		Example: `  capmesh registry find crypto.sign
  capmesh registry find llm:chat --json | jq -r '.providers[0].endpoint'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return cli.UsageErrorf("--limit %d: want 0 (all) or more", limit)
			}
			var res json.RawMessage
			params := map[string]any{"capability": args[0], "include_untrusted": all, "limit": limit}
			if err := registryCall(cmd.Context(), t, "ipc.find_capability", params, &res); err != nil {
				return err
			}
			var out struct {
				Providers []provider `json:"providers"`
			}
			if err := json.Unmarshal(res, &out); err != nil {
				return fmt.Errorf("ipc.find_capability: unexpected answer: %w", err)
			}
			if asJSON {
				printJSON(a.Stdout(), res)
			} else if len(out.Providers) > 0 {
				printProviders(a.Stdout(), out.Providers, time.Now())
			}
			if len(out.Providers) == 0 {
				fmt.Fprintf(a.Stderr(), "no live, trusted provider of %q\n", args[0])
				return cli.SilentExit(cli.ExitFailure)
			}
			return nil
		},
	}
	t.Add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the node's answer as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "include providers the trust policy refuses")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many providers (0: all)")
	return cmd
}

// watchEvent is one ipc.watch event.
type watchEvent struct {
	Revision     uint64    `json:"revision"`
	Kind         string    `json:"kind"`
	Key          string    `json:"key"`
	Primal       string    `json:"primal"`
	Capabilities []string  `json:"capabilities"`
	Endpoint     string    `json:"endpoint"`
	Source       string    `json:"source"`
	Reason       string    `json:"reason"`
	At           time.Time `json:"at"`
}

func newRegistryWatchCmd(a cli.Env) *cobra.Command {
	t := &cli.Target{}
	var asJSON bool
	since := revisionFlag(-1)
	var count int
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "watch [CAPABILITY...]",
		Short: "Print registry changes as they happen",
		Long: `watch prints the node's registry events — registered, replaced, expired,
revoked, deregistered — as they happen, one per line (--json: one JSON
object per line), for every provider or only those having one of the given
capabilities. It starts from the current registry revision, or after
--since REVISION to replay what the node still retains, and runs until
interrupted or until --count events were printed.

A watch that falls behind the node's retained history, or whose node
restarts, says so on stderr and resumes from the node's current revision:
re-list to catch up. A node that goes away is retried every second.`,
		Example: `  capmesh registry watch
  capmesh registry watch crypto.sign --json
  capmesh registry watch --since 0 --count 10`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 0 {
				return cli.UsageErrorf("--count %d: want 0 (unbounded) or more", count)
			}
			if wait <= 0 || wait > time.Minute {
				return cli.UsageErrorf("--poll %s: want more than 0 and at most 1m", wait)
			}
			return runWatch(cmd.Context(), a, t, args, int64(since), count, wait, asJSON)
		},
	}
	t.Add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each event as one JSON object per line")
	cmd.Flags().Var(&since, "since", "print the retained events after this `REVISION` first (default: only new ones)")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many events (0: run until interrupted)")
	cmd.Flags().DurationVar(&wait, "poll", 25*time.Second, "how long one ipc.watch call waits for events")
	return cmd
}

// revisionFlag is --since: a registry revision, or -1 (unset, shown
// without a default in help) for "only new events".
type revisionFlag int64

func (r *revisionFlag) String() string {
	if *r < 0 {
		return ""
	}
	return strconv.FormatInt(int64(*r), 10)
}

func (r *revisionFlag) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return fmt.Errorf("want a revision number (0 or more)")
	}
	*r = revisionFlag(v)
	return nil
}

func (*revisionFlag) Type() string { return "REVISION" }

func runWatch(ctx context.Context, a cli.Env, t *cli.Target, caps []string, since int64, count int, wait time.Duration, asJSON bool) error {
	addr, err := t.Address()
	if err != nil {
		return err
	}
	w := &watcher{a: a, t: t, addr: addr, count: count, asJSON: asJSON}
	defer func() {
		if w.c != nil {
			w.c.Close()
		}
	}()
	if err := w.connect(ctx); err != nil {
		return cli.NetErr(err)
	}
	if since < 0 {
		// Start from now: the revision the node reports with its list.
		var cur struct {
			Revision uint64 `json:"revision"`
		}
		for {
			cctx, cancel := context.WithTimeout(ctx, t.Timeout)
			err := w.c.Call(cctx, "ipc.list", map[string]any{}, &cur)
			cancel()
			if err == nil {
				break
			}
			// A node lost (or draining) right after the connection is
			// waited for like one lost later; any other error ends here.
			var je *jsonrpc.Error
			if errors.As(err, &je) && je.Code != jsonrpc.ServiceDraining {
				return registryErr(addr, "ipc.list", err)
			}
			if err := w.reconnect(ctx, err); err != nil {
				return err
			}
		}
		w.cursor = cur.Revision
	} else {
		w.cursor = uint64(since)
	}
	for {
		var res struct {
			Revision uint64            `json:"revision"`
			Events   []json.RawMessage `json:"events"`
		}
		cctx, cancel := context.WithTimeout(ctx, wait+t.Timeout)
		err := w.c.Call(cctx, "ipc.watch", map[string]any{"since_revision": w.cursor, "capabilities": caps, "wait_ms": wait.Milliseconds()}, &res)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if err := w.resume(ctx, err); err != nil {
				return err
			}
			continue
		}
		if done, err := w.print(res.Events); done || err != nil {
			return err
		}
		if res.Revision > w.cursor {
			w.cursor = res.Revision
		}
	}
}

// watcher is capmesh registry watch under way: its connection, its
// cursor and what it has printed.
type watcher struct {
	a      cli.Env
	t      *cli.Target
	addr   endpoint.Address
	count  int // stop after this many events (0: never)
	asJSON bool

	c       jsonrpc.Caller // nil while disconnected
	cursor  uint64
	printed int
	warned  bool // the loss of the node has been reported
}

// connect dials the node.
func (w *watcher) connect(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, w.t.Timeout)
	defer cancel()
	cc, err := endpoint.DialAddress(dctx, w.addr, nil)
	if err != nil {
		return err
	}
	w.c = cc
	return nil
}

// resume handles a failed ipc.watch: a compacted history or a node
// behind the cursor moves the cursor, a lost (or draining) node is
// reconnected; any other error ends the watch.
func (w *watcher) resume(ctx context.Context, err error) error {
	var je *jsonrpc.Error
	// A draining node is going away: treat it like a lost connection and
	// wait for its successor.
	if !errors.As(err, &je) || je.Code == jsonrpc.ServiceDraining {
		return w.reconnect(ctx, err)
	}
	var data struct {
		Code    string `json:"code"`
		Details struct {
			Revision uint64 `json:"revision"`
		} `json:"details"`
	}
	_ = json.Unmarshal(je.Data, &data)
	switch {
	case je.Code == registry.CodeCompacted:
		fmt.Fprintf(w.a.Stderr(), "watch: events after revision %d are no longer retained; resuming from revision %d (re-list to catch up)\n", w.cursor, data.Details.Revision)
		w.cursor = data.Details.Revision
		return nil
	case je.Code == jsonrpc.InvalidParams && data.Code == registry.CodeWordInvalidParams && strings.Contains(je.Message, "ahead of the registry"):
		// The node restarted with less history than we saw.
		fmt.Fprintf(w.a.Stderr(), "watch: the node is at an earlier revision than %d (restarted from older state?); resuming from its current one\n", w.cursor)
		w.cursor = 0
		var cur struct {
			Revision uint64 `json:"revision"`
		}
		if w.c.Call(ctx, "ipc.list", map[string]any{}, &cur) == nil {
			w.cursor = cur.Revision
		}
		return nil
	}
	return registryErr(w.addr, "ipc.watch", err)
}

// reconnect waits for the node to come back after a transport failure,
// trying every second; it says once that the node was lost.
func (w *watcher) reconnect(ctx context.Context, err error) error {
	if !w.warned {
		fmt.Fprintf(w.a.Stderr(), "watch: lost %s (%v); retrying every second\n", w.addr, err)
		w.warned = true
	}
	w.c.Close()
	w.c = nil
	for w.c == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		_ = w.connect(ctx)
	}
	fmt.Fprintf(w.a.Stderr(), "watch: reconnected to %s\n", w.addr)
	w.warned = false
	return nil
}

// print prints events as a table (or JSON lines); done is set once count
// events are printed.
func (w *watcher) print(events []json.RawMessage) (done bool, err error) {
	for _, raw := range events {
		var ev watchEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return false, fmt.Errorf("ipc.watch: unexpected event %s: %w", raw, err)
		}
		if w.asJSON {
			fmt.Fprintln(w.a.Stdout(), strings.TrimSpace(compactJSON(raw)))
		} else {
			if w.printed == 0 {
				fmt.Fprintf(w.a.Stdout(), "%-6s %-8s %-12s %-16s %-24s %s\n", "REV", "TIME", "EVENT", "NAME", "CAPABILITIES", "ENDPOINT")
			}
			line := fmt.Sprintf("%-6d %-8s %-12s %-16s %-24s %s", ev.Revision, ev.At.Local().Format("15:04:05"), ev.Kind, ev.Primal, strings.Join(ev.Capabilities, ","), ev.Endpoint)
			if ev.Reason != "" {
				line += " (" + ev.Reason + ")"
			}
			fmt.Fprintln(w.a.Stdout(), line)
		}
		w.printed++
		if w.count > 0 && w.printed >= w.count {
			return true, nil
		}
	}
	return false, nil
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func newRegistryRevokeCmd(a cli.Env) *cobra.Command {
	t := &cli.Target{}
	var certID, key, reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke (--cert CERT_ID | --key NODE_PUBLIC_KEY) [--reason REASON]",
		Short: "Revoke a join certificate (or every certificate of a node key) and evict its entries",
		Long: `revoke revokes one join certificate, or every certificate of a node key,
appends them to the node's signed CRL (its sequence grows by one) and evicts
the node's registry entries at once; watchers see a "revoked" event.
REASON is one of unspecified (default), key_compromise, superseded or
cessation_of_operation; key_compromise blocks the key for good, even from
enrolling again.

This is an operator action: the node accepts it only over its Unix socket
from its own user.`,
		Example: `  capmesh registry revoke --cert 3f2a…-…
  capmesh registry revoke --key 'BOIkKzo8v6XcO5qOs5WPh2g0fDcWIh+PGWKhIl3eV08=' --reason key_compromise`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (certID == "") == (key == "") {
				return cli.UsageErrorf("give exactly one of --cert and --key")
			}
			switch reason {
			case registry.ReasonUnspecified, registry.ReasonKeyCompromise, registry.ReasonSuperseded, registry.ReasonCessation:
			default:
				return cli.UsageErrorf("--reason %q: want unspecified, key_compromise, superseded or cessation_of_operation", reason)
			}
			var res json.RawMessage
			params := map[string]any{"cert_id": certID, "node_public_key": key, "reason": reason}
			if err := registryCall(cmd.Context(), t, "registry.revoke", params, &res); err != nil {
				return err
			}
			if asJSON {
				printJSON(a.Stdout(), res)
				return nil
			}
			var out registry.RevokeResult
			if err := json.Unmarshal(res, &out); err != nil {
				return fmt.Errorf("registry.revoke: unexpected answer: %w", err)
			}
			fmt.Fprintf(a.Stdout(), "revoked (%s): CRL sequence %d lists %d certificate(s)\n", reason, out.CRLSequence, out.RevokedCount)
			for _, k := range out.Evicted {
				fmt.Fprintf(a.Stdout(), "evicted %s\n", k)
			}
			return nil
		},
	}
	t.Add(cmd)
	cmd.Flags().StringVar(&certID, "cert", "", "certificate id to revoke")
	cmd.Flags().StringVar(&key, "key", "", "node public key (standard base64) whose certificates to revoke")
	cmd.Flags().StringVar(&reason, "reason", registry.ReasonUnspecified, "unspecified, key_compromise, superseded or cessation_of_operation")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the node's answer as JSON")
	return cmd
}

func newRegistryEnrollCmd(a cli.Env) *cobra.Command {
	t := &cli.Target{}
	var roles []string
	var validity time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "enroll NODE_PUBLIC_KEY",
		Short: "Issue a join certificate for a node key, so its signed descriptors are trusted",
		Long: `enroll has the node's network authority issue an RFC-001 join certificate
for a node public key (standard base64, as in descriptors), so that the
node's signed RFC-005 descriptors are admitted and discoverable. --json
prints the signed certificate exactly as a Genesis-Mesh node stores it.

This is an operator action: the node accepts it only over its Unix socket
from its own user. For a node that enrols itself over HTTP (POST /join),
give it a token from 'capmesh registry invite' instead.`,
		Example: `  capmesh registry enroll 'BOIkKzo8v6XcO5qOs5WPh2g0fDcWIh+PGWKhIl3eV08=' --role role:client --validity 24h`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hours, err := wholeHours("--validity", validity)
			if err != nil {
				return err
			}
			var res json.RawMessage
			params := map[string]any{"node_public_key": args[0], "roles": roles, "validity_hours": hours}
			if err := registryCall(cmd.Context(), t, "registry.enroll", params, &res); err != nil {
				return err
			}
			if asJSON {
				printJSON(a.Stdout(), res)
				return nil
			}
			var c struct {
				CertID    string   `json:"cert_id"`
				NodeKey   string   `json:"node_public_key"`
				Network   string   `json:"network_name"`
				Roles     []string `json:"roles"`
				ExpiresAt string   `json:"expires_at"`
				IssuedBy  string   `json:"issued_by"`
			}
			if err := json.Unmarshal(res, &c); err != nil {
				return fmt.Errorf("registry.enroll: unexpected answer: %w", err)
			}
			fmt.Fprintf(a.Stdout(), "enrolled %s in %s as %s\ncertificate %s, issued by %s, valid until %s\n",
				c.NodeKey, c.Network, strings.Join(c.Roles, ","), c.CertID, c.IssuedBy, c.ExpiresAt)
			return nil
		},
	}
	t.Add(cmd)
	cmd.Flags().StringSliceVar(&roles, "role", nil, "role to grant, repeatable: role:anchor|bridge|client|operator or service:NAME (default role:client)")
	cmd.Flags().DurationVar(&validity, "validity", 168*time.Hour, "certificate lifetime, in whole hours")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the signed certificate as JSON")
	return cmd
}

func newRegistryInviteCmd(a cli.Env) *cobra.Command {
	t := &cli.Target{}
	var roles []string
	var validity, expires time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "invite",
		Short: "Create a single-use invite token a node redeems at POST /join",
		Long: `invite creates a single-use token with which a node enrols itself over
the Genesis-Mesh HTTP shape (POST /join with proof of possession of its
key), e.g. 'genesis-mesh join --na URL --token TOKEN'. The token is printed
once, alone on its line; the node keeps only its hash.

This is an operator action: the node accepts it only over its Unix socket
from its own user.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			maxH, err := wholeHours("--validity", validity)
			if err != nil {
				return err
			}
			expH, err := wholeHours("--expires", expires)
			if err != nil {
				return err
			}
			var res json.RawMessage
			params := map[string]any{"roles": roles, "max_validity_hours": maxH, "token_expiry_hours": expH}
			if err := registryCall(cmd.Context(), t, "registry.invite", params, &res); err != nil {
				return err
			}
			if asJSON {
				printJSON(a.Stdout(), res)
				return nil
			}
			var out struct {
				Token     string `json:"token_id"`
				ExpiresAt string `json:"expires_at"`
			}
			if err := json.Unmarshal(res, &out); err != nil {
				return fmt.Errorf("registry.invite: unexpected answer: %w", err)
			}
			fmt.Fprintln(a.Stdout(), out.Token)
			fmt.Fprintf(a.Stderr(), "single-use invite, redeemable until %s\n", out.ExpiresAt)
			return nil
		},
	}
	t.Add(cmd)
	cmd.Flags().StringSliceVar(&roles, "role", nil, "role the certificate will carry, repeatable (default role:client)")
	cmd.Flags().DurationVar(&validity, "validity", 168*time.Hour, "longest certificate lifetime the token allows, in whole hours")
	cmd.Flags().DurationVar(&expires, "expires", 24*time.Hour, "how long the token can be redeemed, in whole hours")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the node's answer as JSON")
	return cmd
}

func wholeHours(flag string, d time.Duration) (int, error) {
	if d <= 0 || d%time.Hour != 0 {
		return 0, cli.UsageErrorf("%s %s: want a positive whole number of hours, e.g. 24h", flag, d)
	}
	return int(d / time.Hour), nil
}
