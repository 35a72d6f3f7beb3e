package evidencecmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/internal/xdg"
	"github.com/capmesh/capmesh/merkle"
)

// monitorState is what `capmesh evidence monitor` keeps between runs, per
// target: the host key pinned at first contact, the newest head proven
// consistent, and the evidence of a fork once one is seen.
type monitorState struct {
	Hosts map[string]*monitoredHost `json:"hosts"`
}

type monitoredHost struct {
	PublicKey string                 `json:"public_key"`
	Head      *merkle.SignedTreeHead `json:"head,omitempty"`
	Checked   string                 `json:"checked,omitempty"`
	Fork      *monitorFork           `json:"fork,omitempty"`
}

// monitorFork is the portable evidence of a fork: two heads signed by the
// same key that no consistency proof the host served connects.
type monitorFork struct {
	Held   merkle.SignedTreeHead `json:"held"`
	Served merkle.SignedTreeHead `json:"served"`
	Reason string                `json:"reason"`
}

// Monitor verdicts.
const (
	verdictFirst       = "first"
	verdictConsistent  = "consistent"
	verdictForked      = "forked"
	verdictUnreachable = "unreachable"
)

func newEvidenceMonitorCmd(a *app, key *string) *cobra.Command {
	var statePath, keyFlag string
	var interval time.Duration
	var count int
	cmd := &cobra.Command{
		Use:   "monitor TARGET... [--state FILE] [--interval D [--count N]]",
		Short: "Watch hosts' signed log heads and prove each new one extends the last",
		Long: `monitor fetches each host's signed Merkle log head and, against the head it
held from the previous check, the consistency proof between them, and checks
both offline: a host whose new head does not extend the old one (a rewritten or
forked log) is reported 'forked', and the two signed heads are kept in the
state file as portable evidence; the held head is not replaced. The host key is
pinned at first contact (from the host's descriptor, or --log-key for a single
target); a host that later signs with another key is 'forked' too.

With --interval it repeats (until interrupted, or --count times). Exit 1 if any
host forked, 3 if none forked but one was unreachable.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFlag != "" && len(args) != 1 {
				return cli.UsageErrorf("--log-key pins one host's key: give one TARGET")
			}
			if statePath == "" {
				dir, err := xdg.SubDir(a.DataDir(), "witnesses")
				if err != nil {
					return err
				}
				statePath = filepath.Join(dir, "monitor.json")
			}
			if interval > 0 && count == 0 {
				count = -1
			}
			if count == 0 {
				count = 1
			}
			worst := 0
			for round := 0; count < 0 || round < count; round++ {
				if round > 0 {
					select {
					case <-cmd.Context().Done():
						return exitFor(worst)
					case <-time.After(interval):
					}
				}
				code, err := a.monitorRound(cmd.Context(), args, *key, keyFlag, statePath)
				if err != nil {
					return err
				}
				worst = max(worst, code)
			}
			return exitFor(worst)
		},
	}
	f := cmd.Flags()
	f.StringVar(&statePath, "state", "", "the monitor's state file (default: the state directory's witnesses/monitor.json)")
	f.StringVar(&keyFlag, "log-key", "", "pin this public key for the one TARGET instead of trusting first contact")
	f.DurationVar(&interval, "interval", 0, "repeat every D (default: check once)")
	f.IntVar(&count, "count", 0, "with --interval, stop after N rounds (default: until interrupted)")
	return cmd
}

// exitFor maps a round's severity (0 ok, 1 unreachable, 2 forked) to the
// command's result.
func exitFor(severity int) error {
	switch severity {
	case 2:
		return cli.WithCode(cli.ExitFailure, errors.New("a monitored log forked"))
	case 1:
		return cli.WithCode(cli.ExitNetwork, errors.New("a monitored host was unreachable"))
	}
	return nil
}

// monitorRound checks every target once, prints one line each and saves
// the state. It returns the round's severity.
func (a *app) monitorRound(ctx context.Context, targets []string, key, keyFlag, statePath string) (int, error) {
	st := monitorState{Hosts: map[string]*monitoredHost{}}
	if data, err := os.ReadFile(statePath); err == nil {
		if err := json.Unmarshal(data, &st); err != nil {
			return 0, fmt.Errorf("monitor state %s: %w", statePath, err)
		}
		if st.Hosts == nil {
			st.Hosts = map[string]*monitoredHost{}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	severity := 0
	for _, t := range targets {
		h := st.Hosts[t]
		if h == nil {
			h = &monitoredHost{}
			st.Hosts[t] = h
		}
		verdict, detail := a.monitorOne(ctx, newRemote(t, key), h, keyFlag)
		switch verdict {
		case verdictForked:
			severity = max(severity, 2)
		case verdictUnreachable:
			severity = max(severity, 1)
		}
		fmt.Fprintf(a.Stdout(), "%-11s %s  %s\n", verdict, t, detail)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return 0, err
	}
	tmp := statePath + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return 0, err
	}
	return severity, os.Rename(tmp, statePath)
}

// monitorOne checks one host against what h holds and updates h.
func (a *app) monitorOne(ctx context.Context, r *chpRemote, h *monitoredHost, keyFlag string) (verdict, detail string) {
	served, err := r.call(ctx, "GET", "/host", nil, "chp.describe", map[string]any{})
	if err != nil {
		return verdictUnreachable, err.Error()
	}
	var desc chp.HostDescriptor
	if err := json.Unmarshal(served, &desc); err != nil || desc.HostIdentity == nil {
		return verdictUnreachable, "the host has no identity key: its log heads cannot be checked"
	}
	if h.PublicKey == "" {
		h.PublicKey = desc.HostIdentity.PublicKey
		if keyFlag != "" {
			pub, err := logKey(keyFlag)
			if err != nil {
				return verdictUnreachable, err.Error()
			}
			h.PublicKey = pub.Base64()
		}
	}
	pub, err := identity.ParsePublicKeyString(h.PublicKey)
	if err != nil {
		return verdictUnreachable, "pinned key: " + err.Error()
	}
	raw, err := r.call(ctx, "GET", "/log/head", nil, "chp.log.head", map[string]any{})
	if err != nil {
		return verdictUnreachable, err.Error()
	}
	head, err := merkle.ParseSignedTreeHead(raw)
	if err == nil {
		err = head.Verify(pub)
	}
	if err != nil {
		return h.fork(h.heldOr(head), head, "the served head does not verify under the pinned key: "+err.Error())
	}
	h.Checked = chp.FormatTime(time.Now())
	if h.Head == nil {
		h.Head = &head
		return verdictFirst, fmt.Sprintf("%d events, root %s, key %s pinned", head.TreeSize, head.RootHash, pub.KeyID())
	}
	old := *h.Head
	if head.TreeSize < old.TreeSize {
		return h.fork(old, head, fmt.Sprintf("the log shrank from %d to %d events", old.TreeSize, head.TreeSize))
	}
	path := fmt.Sprintf("/log/consistency?first=%d&second=%d", old.TreeSize, head.TreeSize)
	raw, err = r.call(ctx, "GET", path, nil, "chp.log.consistency", map[string]uint64{"first": old.TreeSize, "second": head.TreeSize})
	if err != nil {
		return verdictUnreachable, err.Error()
	}
	var c struct {
		Second merkle.SignedTreeHead   `json:"second"`
		Proof  merkle.ConsistencyProof `json:"proof"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return h.fork(old, head, "the consistency proof does not parse: "+err.Error())
	}
	if c.Second.RootHash != head.RootHash || c.Second.TreeSize != head.TreeSize {
		return h.fork(old, head, "the proof ends at another head than the one served")
	}
	if err := merkle.VerifyConsistency(pub, old, c.Second, c.Proof); err != nil {
		return h.fork(old, head, "the new head does not extend the held one: "+err.Error())
	}
	h.Head = &head
	return verdictConsistent, fmt.Sprintf("%d → %d events, root %s", old.TreeSize, head.TreeSize, head.RootHash)
}

func (h *monitoredHost) heldOr(head merkle.SignedTreeHead) merkle.SignedTreeHead {
	if h.Head != nil {
		return *h.Head
	}
	return head
}

// fork records the evidence and keeps the held head.
func (h *monitoredHost) fork(held, served merkle.SignedTreeHead, reason string) (string, string) {
	h.Fork = &monitorFork{Held: held, Served: served, Reason: reason}
	return verdictForked, reason
}
