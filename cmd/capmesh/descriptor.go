package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/registry/descriptor"
)

func init() { register(newDescriptorCmd) }

func newDescriptorCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "descriptor",
		Short: "Sign and verify RFC-005 capability descriptors offline",
	}
	cmd.AddCommand(newDescriptorVerifyCmd(a), newDescriptorSignCmd(a))
	return cmd
}

func readArgFile(a *app, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(a.stdin)
	}
	return os.ReadFile(name)
}

type verifyReport struct {
	Canonical      string `json:"canonical"`
	SignatureValid bool   `json:"signature_valid"`
	Live           bool   `json:"live"`
	At             string `json:"at"`
	Rule           string `json:"rule,omitempty"`
	Code           string `json:"code,omitempty"`
	Message        string `json:"message,omitempty"`
}

func newDescriptorVerifyCmd(a *app) *cobra.Command {
	var nowFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify FILE",
		Short: "Print a descriptor's canonical signed bytes and check its signature and TTL",
		Long: `verify reads a descriptor (FILE, or - for stdin) and prints the canonical
bytes its signature covers, whether the signature is valid, whether it is
live at --now (default: the current time) and the first rule it breaks.
It exits 0 when the descriptor is valid and live, 1 otherwise.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			if nowFlag != "" {
				t, err := time.Parse(time.RFC3339Nano, nowFlag)
				if err != nil {
					return usageErrorf("--now %q: want RFC 3339, e.g. 2026-07-01T12:05:00Z", nowFlag)
				}
				now = t
			}
			data, err := readArgFile(a, args[0])
			if err != nil {
				return err
			}
			// Accept a reference sample file too ({"descriptor": …}).
			var wrap struct {
				Descriptor json.RawMessage `json:"descriptor"`
			}
			if json.Unmarshal(data, &wrap) == nil && len(wrap.Descriptor) > 0 && wrap.Descriptor[0] == '{' {
				data = wrap.Descriptor
			}
			rep := verifyReport{At: now.UTC().Format(time.RFC3339Nano)}
			fail := func(rule string, err error) {
				if rep.Rule != "" {
					return
				}
				rep.Rule = rule
				rep.Message = err.Error()
				if de, ok := err.(*descriptor.Error); ok {
					rep.Code, rep.Message = de.Code, de.Message
				}
			}
			d, err := descriptor.Parse(data)
			if err != nil {
				fail("schema", err)
			} else {
				rep.Canonical = string(d.CanonicalBytes())
				if err := d.Verify(); err != nil {
					fail("signature", err)
				} else {
					rep.SignatureValid = true
				}
				if err := d.Live(now, descriptor.DefaultSkew); err != nil {
					fail("ttl", err)
				} else {
					rep.Live = true
				}
			}
			if asJSON {
				b, _ := json.MarshalIndent(rep, "", "  ")
				fmt.Fprintln(a.stdout, string(b))
			} else {
				if rep.Canonical != "" {
					fmt.Fprintf(a.stdout, "canonical: %s\n", rep.Canonical)
				}
				fmt.Fprintf(a.stdout, "signature: %s\n", okWord(rep.SignatureValid, "valid", "INVALID"))
				fmt.Fprintf(a.stdout, "live at %s: %s\n", rep.At, okWord(rep.Live, "yes", "no"))
				if rep.Rule != "" {
					fmt.Fprintf(a.stdout, "first broken rule: %s (%s): %s\n", rep.Rule, rep.Code, rep.Message)
				}
			}
			if rep.Rule != "" {
				return silentExit(1)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&nowFlag, "now", "", "check liveness at this RFC 3339 instant instead of now")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON report")
	return cmd
}

func okWord(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

func loadSeed(spec string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(spec)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	if raw, err := hex.DecodeString(s); err == nil && len(raw) == ed25519.SeedSize {
		return ed25519.NewKeyFromSeed(raw), nil
	}
	if raw, err := base64.StdEncoding.Strict().DecodeString(s); err == nil {
		switch len(raw) {
		case ed25519.SeedSize:
			return ed25519.NewKeyFromSeed(raw), nil
		case ed25519.PrivateKeySize:
			return ed25519.PrivateKey(raw), nil
		}
	}
	if len(b) == ed25519.SeedSize {
		return ed25519.NewKeyFromSeed(b), nil
	}
	return nil, fmt.Errorf("%s: want a 32-byte Ed25519 seed (raw, hex or base64) or a 64-byte private key (base64)", spec)
}

func newDescriptorSignCmd(a *app) *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "sign FILE --key KEYFILE",
		Short: "Normalize a descriptor and sign it with a node key",
		Long: `sign reads a descriptor (FILE, or - for stdin), fills in the defaults,
sets node_public_key from the key when missing, signs the canonical bytes
with the Ed25519 key in KEYFILE (a 32-byte seed as hex or base64) and
prints the signed descriptor.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return usageErrorf("--key is required")
			}
			priv, err := loadSeed(keyFile)
			if err != nil {
				return usageErrorf("--key: %v", err)
			}
			data, err := readArgFile(a, args[0])
			if err != nil {
				return err
			}
			var obj map[string]any
			if err := json.Unmarshal(data, &obj); err == nil && obj["node_public_key"] == nil {
				obj["node_public_key"] = base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
				data, _ = json.Marshal(obj)
			}
			d, err := descriptor.Parse(data)
			if err != nil {
				return err
			}
			if err := d.Sign(priv); err != nil {
				return err
			}
			out, _ := d.MarshalJSON()
			fmt.Fprintln(a.stdout, string(out))
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "file holding the node's Ed25519 seed (hex or base64)")
	return cmd
}
