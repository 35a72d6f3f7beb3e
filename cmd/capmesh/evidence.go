package main

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
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/spf13/cobra"
)

func init() { register(newEvidenceCmd) }

func newEvidenceCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "Replay, export and verify CHP execution evidence",
		Long: `Work with the execution evidence of any Capability Host Protocol host.

TARGET is either a CHP host's HTTP binding (http://host:port, key from --key
or CHP_HOST_API_KEY) or a capmesh host's JSON-RPC endpoint (unix:///path,
tcp://host:port, or a socket path), which carries the same objects.`,
	}
	var key string
	cmd.PersistentFlags().StringVar(&key, "key", os.Getenv("CHP_HOST_API_KEY"), "X-CHP-Key for HTTP targets (default $CHP_HOST_API_KEY)")
	cmd.AddCommand(newEvidenceReplayCmd(a, &key), newEvidenceExportCmd(a, &key), newEvidenceVerifyCmd(a, &key))
	cmd.AddCommand(newEvidenceCheckCmd(a))
	return cmd
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
		c, err := endpoint.Dial(ctx, r.target)
		if err != nil {
			return nil, withCode(exitNetwork, err)
		}
		defer c.Close()
		var out json.RawMessage
		if err := c.Call(ctx, rpcMethod, rpcParams, &out); err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				return nil, err
			}
			return nil, withCode(exitNetwork, err)
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
		return nil, usageErrorf("target %q: %v", r.target, err)
	}
	if r.key != "" {
		req.Header.Set("X-CHP-Key", r.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, withCode(exitNetwork, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, withCode(exitNetwork, err)
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
	)
	cmd := &cobra.Command{
		Use:   "replay TARGET CORRELATION_ID",
		Short: "Print a correlation's evidence in sequence order (a ReplayResult)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := chp.ReplayQuery{CorrelationID: args[1]}
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
			r := newRemote(args[0], *key)
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
			return printIndented(a.stdout, out)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many events")
	cmd.Flags().IntVar(&since, "since", 0, "only events with a sequence above this (exclusive)")
	cmd.Flags().BoolVar(&noPayloads, "no-payloads", false, "replace event payloads with {}")
	return cmd
}

func newEvidenceExportCmd(a *app, key *string) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export TARGET CORRELATION_ID",
		Short: "Fetch a correlation's evidence bundle (signed when the host has a key)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := newRemote(args[0], *key)
			data, err := r.call(cmd.Context(), http.MethodGet, "/export/"+url.PathEscape(args[1]), nil,
				"chp.export", map[string]string{"correlation_id": args[1]})
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = a.stdout.Write(append(data, '\n'))
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
sealed by capmesh also have their subject, denial, error, sequence, version
and causation checked. Given TARGET and CORRELATION_ID it exports the bundle
from the host first (never trusting the host's own verdict).

Exit status: 0 valid, 1 invalid, 2 usage, 3 network.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			var err error
			switch {
			case len(args) == 2:
				data, err = newRemote(args[0], *key).call(cmd.Context(), http.MethodGet, "/export/"+url.PathEscape(args[1]), nil,
					"chp.export", map[string]string{"correlation_id": args[1]})
			case args[0] == "-":
				data, err = io.ReadAll(io.LimitReader(a.stdin, 1<<30))
			default:
				data, err = os.ReadFile(args[0])
				if errors.Is(err, os.ErrNotExist) {
					return usageErrorf("%v", err)
				}
			}
			if err != nil {
				return err
			}
			v, err := chp.VerifyBundle(data, &chp.VerifyOptions{ExpectedKeyID: keyID, RequireSigned: requireSigned})
			if err != nil {
				fmt.Fprintf(a.stderr, "capmesh: %v\n", err)
				return silentExit(exitFailure)
			}
			if asJSON {
				b, _ := json.MarshalIndent(v, "", "  ")
				fmt.Fprintln(a.stdout, string(b))
			} else {
				verdict := "VALID"
				if !v.Valid {
					verdict = "INVALID"
				}
				fmt.Fprintf(a.stdout, "%s (%s, %d events, host %s", verdict, v.Assurance, v.EventCount, v.HostID)
				if v.KeyID != "" {
					fmt.Fprintf(a.stdout, ", key %s", v.KeyID)
				}
				fmt.Fprintln(a.stdout, ")")
				for _, c := range v.Checks {
					mark := "ok  "
					if !c.OK {
						mark = "FAIL"
					}
					line := fmt.Sprintf("  %s %s", mark, c.Name)
					if c.Detail != "" {
						line += ": " + c.Detail
					}
					fmt.Fprintln(a.stdout, line)
				}
			}
			if !v.Valid {
				return silentExit(exitFailure)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keyID, "key-id", "", "reject a bundle not signed by this key id")
	cmd.Flags().BoolVar(&requireSigned, "require-signed", false, "reject bundles below the signed tier")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON")
	return cmd
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
