package evidencecmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/spf13/cobra"
)

// app is the evidence commands' view of the process, with the group's
// --name flag.
type app struct {
	cli.Env
	name string // --name: the primal whose socket replaces TARGET
}

// New is `capmesh evidence` with replay, export, verify, witness, prove,
// consistency and monitor; more (such as check) are added by the caller.
func New(env cli.Env) *cobra.Command {
	a := &app{Env: env}
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "Replay, export and verify CHP execution evidence",
		Long: `Work with the execution evidence of any Capability Host Protocol host.

TARGET is either a CHP host's HTTP binding (http://host:port, key from --key
or CHP_HOST_API_KEY) or a capmesh host's JSON-RPC endpoint (unix:///path,
tcp://host:port, or a socket path), which carries the same objects. With
--name PRIMAL the TARGET is left out: the primal's socket in the biomeos
directory, as for 'capmesh call --name'.`,
		Example: `  capmesh evidence replay --name kvhost tour-1
  capmesh evidence export --name kvhost tour-1 > bundle.json
  capmesh evidence replay http://127.0.0.1:8899 corr-1 --json`,
	}
	var key string
	cmd.PersistentFlags().StringVar(&key, "key", os.Getenv("CHP_HOST_API_KEY"), "X-CHP-Key for HTTP targets (default $CHP_HOST_API_KEY)")
	cmd.PersistentFlags().StringVar(&a.name, "name", "", "primal name: its socket in the biomeos directory replaces TARGET")
	cmd.AddCommand(newEvidenceReplayCmd(a, &key), newEvidenceExportCmd(a, &key), newEvidenceVerifyCmd(a, &key))
	cmd.AddCommand(newEvidenceWitnessCmd(a, &key), newEvidenceProveCmd(a, &key), newEvidenceConsistencyCmd(a, &key), newEvidenceMonitorCmd(a, &key))
	return cmd
}

// evidenceArgs accepts TARGET CORRELATION_ID, or CORRELATION_ID alone with
// --name.
func (a *app) evidenceArgs(_ *cobra.Command, args []string) error {
	if a.name != "" {
		if len(args) != 1 {
			return cli.UsageErrorf("with --name give only CORRELATION_ID (got %d arguments)", len(args))
		}
		return nil
	}
	if len(args) != 2 {
		return cli.UsageErrorf("give TARGET CORRELATION_ID, or --name PRIMAL CORRELATION_ID (got %d arguments)", len(args))
	}
	return nil
}

// evidenceTarget resolves TARGET (or --name) and returns the remote and the
// correlation id. A TARGET that is not an endpoint is a usage error that
// points at --name when it looks like a primal's name.
func (a *app) evidenceTarget(args []string, key string) (*chpRemote, string, error) {
	if a.name != "" {
		p, err := endpoint.SocketPath(a.name)
		if err != nil {
			return nil, "", cli.UsageErrorf("--name: %v", err)
		}
		return newRemote("unix://"+p, key), args[0], nil
	}
	target := args[0]
	r := newRemote(target, key)
	if r.isHTTP() {
		if _, err := url.Parse(target); err != nil {
			return nil, "", cli.UsageErrorf("TARGET %q: %v", target, err)
		}
		return r, args[1], nil
	}
	if _, err := endpoint.Parse(target); err != nil {
		hint := ""
		if endpoint.ValidateName(target) == nil {
			hint = fmt.Sprintf("; for the primal named %s use --name %s", target, target)
		}
		return nil, "", cli.UsageErrorf("TARGET %q: want http(s)://host:port, unix:///path, tcp://host:port or a socket path%s", target, hint)
	}
	return r, args[1], nil
}

// chpRemote fetches CHP objects from a host over either binding.
type chpRemote struct {
	target string
	key    string
	hc     *http.Client
}

func (r *chpRemote) isHTTP() bool {
	return strings.HasPrefix(r.target, "http://") || strings.HasPrefix(r.target, "https://")
}

// call performs one request: an HTTP route or the equivalent chp.* method.
func (r *chpRemote) call(ctx context.Context, method, path string, body any, rpcMethod string, rpcParams any) (json.RawMessage, error) {
	if !r.isHTTP() {
		addr, err := endpoint.Parse(r.target)
		if err != nil {
			return nil, cli.UsageErrorf("TARGET %q: %v", r.target, err)
		}
		c, err := endpoint.DialAddress(ctx, addr, nil)
		if err != nil {
			return nil, cli.NetErr(err)
		}
		defer c.Close()
		var out json.RawMessage
		if err := c.Call(ctx, rpcMethod, rpcParams, &out); err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				return nil, err
			}
			return nil, cli.WithCode(cli.ExitNetwork, err)
		}
		return out, nil
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(r.target, "/")+path, rd)
	if err != nil {
		return nil, cli.UsageErrorf("target %q: %v", r.target, err)
	}
	if r.key != "" {
		req.Header.Set("X-CHP-Key", r.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, cli.WithCode(cli.ExitNetwork, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, cli.WithCode(cli.ExitNetwork, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		if resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("%s: HTTP 401 (%s): pass --key or set CHP_HOST_API_KEY", path, e.Error.Message)
		}
		return nil, fmt.Errorf("%s: HTTP %d %s: %s", path, resp.StatusCode, e.Error.Code, e.Error.Message)
	}
	return data, nil
}

func newRemote(target, key string) *chpRemote {
	return &chpRemote{target: target, key: key, hc: &http.Client{Timeout: 60 * time.Second}}
}

func newEvidenceReplayCmd(a *app, key *string) *cobra.Command {
	var (
		limit, since int
		noPayloads   bool
		asJSON       bool
	)
	cmd := &cobra.Command{
		Use:   "replay (TARGET | --name PRIMAL) CORRELATION_ID",
		Short: "Print a correlation's evidence in sequence order",
		Long: `replay fetches a correlation's evidence in sequence order and prints one row
per event: its sequence, time, event type, outcome, capability and the first
12 hex digits of its content hash. --json prints the host's ReplayResult as
received (indented), payloads included, for scripts. Replay shows what the
host says; 'capmesh evidence verify' checks it.`,
		Args: a.evidenceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, corr, err := a.evidenceTarget(args, *key)
			if err != nil {
				return err
			}
			q := chp.ReplayQuery{CorrelationID: corr}
			if limit > 0 {
				q.Limit = &limit
			}
			if since > 0 {
				s := uint64(since)
				q.SinceSequence = &s
			}
			if noPayloads {
				f := false
				q.IncludePayloads = &f
			}
			path, method := "/replay", http.MethodPost
			if q.Limit == nil && q.SinceSequence == nil && q.IncludePayloads == nil {
				path, method = "/replay/"+url.PathEscape(q.CorrelationID), http.MethodGet
			}
			var body any
			if method == http.MethodPost {
				body = q
			}
			out, err := r.call(cmd.Context(), method, path, body, "chp.replay", q)
			if err != nil {
				return err
			}
			if asJSON {
				return printIndented(a.Stdout(), out)
			}
			return printReplay(a.Stdout(), a.Stderr(), out)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the host's ReplayResult as JSON")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many events")
	cmd.Flags().IntVar(&since, "since", 0, "only events with a sequence above this (exclusive)")
	cmd.Flags().BoolVar(&noPayloads, "no-payloads", false, "replace event payloads with {}")
	return cmd
}

func newEvidenceExportCmd(a *app, key *string) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export (TARGET | --name PRIMAL) CORRELATION_ID",
		Short: "Fetch a correlation's evidence bundle (signed when the host has a key)",
		Args:  a.evidenceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, corr, err := a.evidenceTarget(args, *key)
			if err != nil {
				return err
			}
			data, err := r.call(cmd.Context(), http.MethodGet, "/export/"+url.PathEscape(corr), nil,
				"chp.export", map[string]string{"correlation_id": corr})
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = a.Stdout().Write(append(data, '\n'))
				return err
			}
			// Bundles are public evidence, not secrets; 0644 like any export.
			return os.WriteFile(out, append(data, '\n'), 0o644)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the bundle to this file (default stdout)")
	return cmd
}

func newEvidenceVerifyCmd(a *app, key *string) *cobra.Command {
	var (
		keyID         string
		requireSigned bool
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "verify BUNDLE.json | - | TARGET CORRELATION_ID",
		Short: "Verify an evidence bundle offline (a file, stdin, or one exported from a host)",
		Long: `Verify an evidence bundle offline: every event's content hash, the chain from
genesis, payload commitments, the root hash, the completeness claim, and at the
signed tier the header signature and the host-identity attestation; events
sealed by capmesh also have their attribution (subject, denial, error,
sequence, version, correlation: every member besides the payload) checked,
withheld payloads or not. Each event is listed as attribution bound or
unbound; a bundle whose events bind none (a reference host's) verifies with a
warning that who acted and why it was denied are not protected. Given TARGET and CORRELATION_ID it exports the bundle
from the host first (never trusting the host's own verdict).

Exit status: 0 valid, 1 invalid, 2 usage, 3 network.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			var err error
			switch {
			case len(args) == 2 || a.name != "":
				if err := a.evidenceArgs(cmd, args); err != nil {
					return err
				}
				r, corr, err := a.evidenceTarget(args, *key)
				if err != nil {
					return err
				}
				data, err = r.call(cmd.Context(), http.MethodGet, "/export/"+url.PathEscape(corr), nil,
					"chp.export", map[string]string{"correlation_id": corr})
				if err != nil {
					return err
				}
			case args[0] == "-":
				data, err = io.ReadAll(io.LimitReader(a.Stdin(), 1<<30))
			default:
				data, err = os.ReadFile(args[0])
				if errors.Is(err, os.ErrNotExist) {
					return cli.UsageErrorf("%v", err)
				}
			}
			if err != nil {
				return err
			}
			v, err := chp.VerifyBundle(data, &chp.VerifyOptions{ExpectedKeyID: keyID, RequireSigned: requireSigned})
			if err != nil {
				fmt.Fprintf(a.Stderr(), "capmesh: %v\n", err)
				return cli.SilentExit(cli.ExitFailure)
			}
			if asJSON {
				b, _ := json.MarshalIndent(v, "", "  ")
				fmt.Fprintln(a.Stdout(), string(b))
			} else {
				printVerdict(a.Stdout(), v)
			}
			if !v.Valid {
				return cli.SilentExit(cli.ExitFailure)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keyID, "key-id", "", "reject a bundle not signed by this key id")
	cmd.Flags().BoolVar(&requireSigned, "require-signed", false, "reject bundles below the signed tier")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON")
	return cmd
}

// printReplay writes a ReplayResult as a table, one row per event.
func printReplay(w, stderr io.Writer, data json.RawMessage) error {
	var res chp.ReplayResult
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("host answered an invalid ReplayResult: %w", err)
	}
	if len(res.Events) == 0 {
		fmt.Fprintf(stderr, "no evidence for correlation %s\n", res.CorrelationID)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tEVENT\tOUTCOME\tCAPABILITY\tHASH")
	for _, raw := range res.Events {
		var e struct {
			Sequence     *uint64 `json:"sequence"`
			Timestamp    string  `json:"timestamp"`
			EventType    string  `json:"event_type"`
			Outcome      *string `json:"outcome"`
			CapabilityID string  `json:"capability_id"`
			ContentHash  *string `json:"content_hash"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("host answered an invalid event: %w", err)
		}
		seq, outcome, hash := "-", "-", "-"
		if e.Sequence != nil {
			seq = fmt.Sprint(*e.Sequence)
		}
		if e.Outcome != nil && *e.Outcome != "" {
			outcome = *e.Outcome
		}
		if e.ContentHash != nil && *e.ContentHash != "" {
			hash = *e.ContentHash
			if len(hash) > 12 {
				hash = hash[:12]
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", seq, e.Timestamp, e.EventType, outcome, e.CapabilityID, hash)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tail := fmt.Sprintf("%d event(s), correlation %s", len(res.Events), res.CorrelationID)
	if res.Truncated {
		tail += " (truncated: more with --since)"
	}
	_, err := fmt.Fprintln(w, tail)
	return err
}

func printIndented(w io.Writer, data json.RawMessage) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("host answered invalid JSON: %w", err)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	_, err := fmt.Fprintln(w, string(b))
	return err
}
