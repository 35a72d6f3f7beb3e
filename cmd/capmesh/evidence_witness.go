package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/internal/xdg"
	"github.com/capmesh/capmesh/merkle"
)

// remoteOnly resolves TARGET (args[0]) or --name into a remote and returns
// the remaining arguments.
func (a *app) remoteOnly(args []string, key string) (*chpRemote, []string, error) {
	if a.evidenceName != "" {
		p, err := endpoint.SocketPath(a.evidenceName)
		if err != nil {
			return nil, nil, usageErrorf("--name: %v", err)
		}
		return newRemote("unix://"+p, key), args, nil
	}
	if len(args) == 0 {
		return nil, nil, usageErrorf("give TARGET, or --name PRIMAL")
	}
	r := newRemote(args[0], key)
	if !r.isHTTP() {
		if _, err := endpoint.Parse(args[0]); err != nil {
			return nil, nil, usageErrorf("TARGET %q: want http(s)://host:port, unix:///path, tcp://host:port or a socket path", args[0])
		}
	}
	return r, args[1:], nil
}

// logKey reads --log-key: a public key (base64, base64url or hex), or a
// file holding one, or a JSON document with a public_key member (`capmesh
// keys show --json`, a host's /.well-known/chp-identity).
func logKey(flag string) (identity.PublicKey, error) {
	if flag == "" {
		return identity.PublicKey{}, usageErrorf("--log-key is required: the host's public key, or a file holding it")
	}
	value := flag
	if data, err := os.ReadFile(flag); err == nil {
		value = strings.TrimSpace(string(data))
		var doc struct {
			PublicKey string `json:"public_key"`
		}
		if strings.HasPrefix(value, "{") {
			if err := json.Unmarshal(data, &doc); err != nil || doc.PublicKey == "" {
				return identity.PublicKey{}, usageErrorf("--log-key %s: no public_key member", flag)
			}
			value = doc.PublicKey
		}
	}
	raw, _, err := identity.DecodeAny(value, 32)
	if err != nil {
		return identity.PublicKey{}, usageErrorf("--log-key: %v", err)
	}
	pub, err := identity.ParsePublicKey(raw)
	if err != nil {
		return identity.PublicKey{}, usageErrorf("--log-key: %v", err)
	}
	return pub, nil
}

// fetchOrRead is the online/offline split of prove and consistency: with
// --file the JSON is read from it, otherwise fetched and, with --save,
// written there.
func fetchOrRead(ctx context.Context, file, save string, fetch func(context.Context) (json.RawMessage, error)) ([]byte, error) {
	if file != "" {
		return os.ReadFile(file)
	}
	data, err := fetch(ctx)
	if err != nil {
		return nil, err
	}
	if save != "" {
		if err := os.WriteFile(save, append(data, '\n'), 0o644); err != nil {
			return nil, err
		}
	}
	return data, nil
}

func newEvidenceProveCmd(a *app, key *string) *cobra.Command {
	var file, save, keyFlag string
	var treeSize uint64
	cmd := &cobra.Command{
		Use:   "prove (TARGET SEQUENCE | --name PRIMAL SEQUENCE | --file PROOF.json) --log-key KEY",
		Short: "Check that an event is in a host's Merkle event log, against a signed head",
		Long: `prove fetches (or, with --file, reads) an event's inclusion proof in the host's
append-only Merkle event log — the event's stored bytes, a tree head signed by
the host key and the RFC 9162 inclusion path — and checks it offline against
--log-key. Leaf i of the log is the i-th event of the global sequence; the leaf
data is the event's stored bytes. --save keeps what was fetched for a later
offline check. Exit 1 when the proof does not verify.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := logKey(keyFlag)
			if err != nil {
				return err
			}
			data, err := fetchOrRead(cmd.Context(), file, save, func(ctx context.Context) (json.RawMessage, error) {
				r, rest, err := a.remoteOnly(args, *key)
				if err != nil {
					return nil, err
				}
				if len(rest) != 1 {
					return nil, usageErrorf("give the event's SEQUENCE")
				}
				seq, err := strconv.ParseUint(rest[0], 10, 63)
				if err != nil {
					return nil, usageErrorf("SEQUENCE %q: %v", rest[0], err)
				}
				path := fmt.Sprintf("/log/inclusion?sequence=%d&tree_size=%d", seq, treeSize)
				return r.call(ctx, "GET", path, nil, "chp.log.inclusion", map[string]uint64{"sequence": seq, "tree_size": treeSize})
			})
			if err != nil {
				return err
			}
			var p evlog.LogInclusion
			if err := json.Unmarshal(data, &p); err != nil {
				return withCode(exitFailure, fmt.Errorf("inclusion proof: %w", err))
			}
			if err := merkle.VerifyInclusion(pub, p.Head, merkle.LeafHash(p.Event), p.Proof); err != nil {
				return withCode(exitFailure, fmt.Errorf("NOT PROVEN: event %d: %w", p.Sequence, err))
			}
			fmt.Fprintf(a.stdout, "PROVEN: event %d is leaf %d of the log of %d events (root %s, signed by %s)\n",
				p.Sequence, p.Proof.LeafIndex, p.Head.TreeSize, p.Head.RootHash, pub.KeyID())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "check this saved proof offline instead of fetching one")
	f.StringVar(&save, "save", "", "write the fetched proof to this file")
	f.StringVar(&keyFlag, "log-key", "", "the host's public key (or a file holding it, or its identity JSON)")
	f.Uint64Var(&treeSize, "tree-size", 0, "prove under the head of this many events (default: the current head)")
	return cmd
}

func newEvidenceConsistencyCmd(a *app, key *string) *cobra.Command {
	var file, save, keyFlag, since string
	cmd := &cobra.Command{
		Use:   "consistency (TARGET [FIRST [SECOND]] | --name PRIMAL [FIRST [SECOND]] | --file PROOF.json) --log-key KEY",
		Short: "Check that a host's event log only grew between two signed heads",
		Long: `consistency fetches (or, with --file, reads) two tree heads of the host's Merkle
event log, of FIRST and SECOND events (SECOND default: now), both signed by the
host key, and the RFC 9162 consistency proof between them, and checks it
offline against --log-key. --since FILE also requires the first head to be
one you held before (size and root): the check that catches a rewritten log.
FILE is a signed head, or a proof saved before (its newest head is taken), and
FIRST then defaults to its size. Exit 1 when anything does not verify.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := logKey(keyFlag)
			if err != nil {
				return err
			}
			var held *merkle.SignedTreeHead
			if since != "" {
				h, err := readHead(since)
				if err != nil {
					return err
				}
				held = &h
			}
			data, err := fetchOrRead(cmd.Context(), file, save, func(ctx context.Context) (json.RawMessage, error) {
				r, rest, err := a.remoteOnly(args, *key)
				if err != nil {
					return nil, err
				}
				if len(rest) == 0 && held != nil {
					rest = []string{strconv.FormatUint(held.TreeSize, 10)}
				}
				if len(rest) < 1 || len(rest) > 2 {
					return nil, usageErrorf("give FIRST [SECOND] tree sizes, or --since")
				}
				var sizes [2]uint64
				for i, s := range rest {
					if sizes[i], err = strconv.ParseUint(s, 10, 63); err != nil {
						return nil, usageErrorf("tree size %q: %v", s, err)
					}
				}
				path := fmt.Sprintf("/log/consistency?first=%d&second=%d", sizes[0], sizes[1])
				return r.call(ctx, "GET", path, nil, "chp.log.consistency", map[string]uint64{"first": sizes[0], "second": sizes[1]})
			})
			if err != nil {
				return err
			}
			var c evlog.LogConsistency
			if err := json.Unmarshal(data, &c); err != nil {
				return withCode(exitFailure, fmt.Errorf("consistency proof: %w", err))
			}
			if held != nil {
				if held.TreeSize != c.First.TreeSize || held.RootHash != c.First.RootHash {
					return withCode(exitFailure, fmt.Errorf("NOT CONSISTENT: the proof starts at a head of %d events with root %s, not the held one (%d, %s)",
						c.First.TreeSize, c.First.RootHash, held.TreeSize, held.RootHash))
				}
			}
			if err := merkle.VerifyConsistency(pub, c.First, c.Second, c.Proof); err != nil {
				return withCode(exitFailure, fmt.Errorf("NOT CONSISTENT: %w", err))
			}
			fmt.Fprintf(a.stdout, "CONSISTENT: the log of %d events (root %s) extends the log of %d events (root %s), signed by %s\n",
				c.Second.TreeSize, c.Second.RootHash, c.First.TreeSize, c.First.RootHash, pub.KeyID())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "check this saved proof offline instead of fetching one")
	f.StringVar(&save, "save", "", "write the fetched proof to this file")
	f.StringVar(&since, "since", "", "a signed head held before, which the proof must start from")
	f.StringVar(&keyFlag, "log-key", "", "the host's public key (or a file holding it, or its identity JSON)")
	return cmd
}

// readHead reads a held head: a signed tree head file (the JSON of
// /log/head), or a saved consistency proof (its second head) or inclusion
// proof (its head).
func readHead(path string) (merkle.SignedTreeHead, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return merkle.SignedTreeHead{}, err
	}
	data = []byte(strings.TrimSpace(string(data)))
	h, err := merkle.ParseSignedTreeHead(data)
	if err == nil {
		return h, nil
	}
	var saved map[string]json.RawMessage
	if json.Unmarshal(data, &saved) == nil {
		for _, k := range []string{"second", "head"} {
			if raw, ok := saved[k]; ok {
				if h, err = merkle.ParseSignedTreeHead(raw); err == nil {
					return h, nil
				}
			}
		}
	}
	return merkle.SignedTreeHead{}, usageErrorf("%s: not a signed tree head or a saved proof: %v", path, err)
}

func newEvidenceWitnessCmd(a *app, key *string) *cobra.Command {
	var keyFile, as string
	var withRevocation bool
	cmd := &cobra.Command{
		Use:   "witness (TARGET | --name PRIMAL)",
		Short: "Countersign a host's store head and deliver the statement to it",
		Long: `witness fetches the host's store head (GET /head), signs a chain-witness
statement over it with this host's identity key (--identity-key, default the
state directory's key) as witness --as, and delivers it (POST /witness); the
host recomputes its own head at that sequence before keeping it. The statement
is also kept here, under the state directory's witnesses/issued/, where the
witnessed operator cannot delete it.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, rest, err := a.remoteOnly(args, *key)
			if err != nil {
				return err
			}
			if len(rest) != 0 {
				return usageErrorf("witness takes only TARGET")
			}
			k, _, err := keysLoad(a, keyFile)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			raw, err := r.call(ctx, "GET", "/head", nil, "chp.head", map[string]any{})
			if err != nil {
				return err
			}
			var h chp.StoreHead
			if err := json.Unmarshal(raw, &h); err != nil {
				return fmt.Errorf("head: %w", err)
			}
			rev := ""
			if withRevocation {
				rev = h.RevocationHead
			}
			if as == "" {
				as = "witness-" + k.Public().KeyID()
			}
			stmt, err := chp.NewChainWitness(h.HostID, h.Sequence, h.StoreHead, rev, as, k.Ed25519(), chp.FormatTime(time.Now()))
			if err != nil {
				return err
			}
			if _, err := r.call(ctx, "POST", "/witness", json.RawMessage(stmt), "chp.witness", json.RawMessage(stmt)); err != nil {
				return err
			}
			path, err := keepIssued(a, h.HostID, stmt)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "witnessed %s at sequence %d: %s (kept in %s)\n", h.HostID, h.Sequence, h.StoreHead, path)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "identity-key", "", "the witness's key file (default: the state directory's identity key)")
	f.StringVar(&as, "as", "", "the witness's host id (default witness-<key id>)")
	f.BoolVar(&withRevocation, "revocation-head", true, "countersign the host's revocation_head too")
	return cmd
}

// keepIssued appends an issued statement to the state directory's
// witnesses/issued/<host>.jsonl.
func keepIssued(a *app, hostID string, stmt []byte) (string, error) {
	dir, err := xdg.SubDir(a.dataDir, "witnesses")
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "issued")
	if err := xdg.EnsurePrivateDir(dir); err != nil {
		return "", err
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == 0 {
			return '_'
		}
		return r
	}, hostID)
	if name == "" || name == "." || name == ".." {
		name = "_" + name
	}
	path := filepath.Join(dir, name+".jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.Write(append(append([]byte(nil), stmt...), '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return path, err
}
