package keyscmd

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// NewDescriptor is `capmesh descriptor`: verify and sign RFC-005
// capability descriptors.
func NewDescriptor(a cli.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "descriptor",
		Short: "Sign and verify RFC-005 capability descriptors offline",
	}
	cmd.AddCommand(newDescriptorVerifyCmd(a), newDescriptorSignCmd(a))
	return cmd
}

func readArgFile(a cli.Env, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(a.Stdin())
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

func newDescriptorVerifyCmd(a cli.Env) *cobra.Command {
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
					return cli.UsageErrorf("--now %q: want RFC 3339, e.g. 2026-07-01T12:05:00Z", nowFlag)
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
				fmt.Fprintln(a.Stdout(), string(b))
			} else {
				if rep.Canonical != "" {
					fmt.Fprintf(a.Stdout(), "canonical: %s\n", rep.Canonical)
				}
				fmt.Fprintf(a.Stdout(), "signature: %s\n", okWord(rep.SignatureValid, "valid", "INVALID"))
				fmt.Fprintf(a.Stdout(), "live at %s: %s\n", rep.At, okWord(rep.Live, "yes", "no"))
				if rep.Rule != "" {
					fmt.Fprintf(a.Stdout(), "first broken rule: %s (%s): %s\n", rep.Rule, rep.Code, rep.Message)
				}
			}
			if rep.Rule != "" {
				return cli.SilentExit(1)
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

// loadSigningKey reads the Ed25519 key of descriptor sign --key: any file
// 'capmesh keys' manages (PKCS#8 PEM, or the base64 seed that 'capmesh keys
// export --seed' prints), a hex seed, a base64 64-byte private key or the
// raw 32 seed bytes. Every format gets the key-file checks of package
// identity: a file that others can read or change is refused.
func loadSigningKey(path string) (ed25519.PrivateKey, error) {
	k, err := identity.Load(path)
	if err == nil {
		return k.Ed25519(), nil
	}
	if errors.Is(err, identity.ErrInsecureKeyFile) {
		return nil, err
	}
	// Load checked the file and could not parse it (or could not read it:
	// then reading it again fails the same way).
	f, oerr := os.Open(path)
	if oerr != nil {
		return nil, err
	}
	defer f.Close()
	b, rerr := io.ReadAll(io.LimitReader(f, 4096))
	if rerr != nil {
		return nil, err
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("-----BEGIN")) {
		return nil, err // a PEM file identity could not use: its reason stands
	}
	s := strings.TrimSpace(string(b))
	if raw, herr := hex.DecodeString(s); herr == nil && len(raw) == ed25519.SeedSize {
		return ed25519.NewKeyFromSeed(raw), nil
	}
	if raw, berr := base64.StdEncoding.Strict().DecodeString(s); berr == nil && len(raw) == ed25519.PrivateKeySize {
		priv := ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
		if !bytes.Equal(priv[ed25519.SeedSize:], raw[ed25519.SeedSize:]) {
			return nil, fmt.Errorf("%s: the 64-byte private key's public half does not match its seed", path)
		}
		return priv, nil
	}
	if len(b) == ed25519.SeedSize {
		return ed25519.NewKeyFromSeed(b), nil
	}
	return nil, fmt.Errorf("%s: not a key: want a PKCS#8 PEM key (what 'capmesh keys generate' writes), a 32-byte Ed25519 seed (hex, base64 or raw) or a 64-byte private key (base64)", path)
}

// signDescriptor is descriptor sign: it sets node_public_key from priv
// when the document has none (byte-faithfully: every other member, number
// literal and string is signed as written), checks the schema, fills in the
// defaults and returns the signed descriptor in its wire form.
func signDescriptor(data []byte, priv ed25519.PrivateKey) ([]byte, error) {
	data, err := descriptor.WithNodeKey(data, base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)))
	if err != nil {
		return nil, err
	}
	d, err := descriptor.Parse(data)
	if err != nil {
		return nil, err
	}
	if err := d.Sign(priv); err != nil {
		return nil, err
	}
	return d.MarshalJSON()
}

func newDescriptorSignCmd(a cli.Env) *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "sign FILE [--key KEYFILE]",
		Short: "Normalize a descriptor and sign it with a node key",
		Long: `sign reads a descriptor (FILE, or - for stdin), fills in the defaults,
sets node_public_key from the key when it is missing or null, signs the
canonical bytes and prints the signed descriptor. Every member is signed
as written: number literals (1.0, 12345678901234567890) and strings are
kept exactly, and a port that is not an integer (8443.0) is refused.

The key is the host's identity key ('capmesh keys'; the state directory's
keys/identity.pem) unless --key names another file: a PKCS#8 PEM key, a
32-byte Ed25519 seed as hex, base64 ('capmesh keys export --seed') or raw
bytes, or a 64-byte private key as base64. A key file others can read is
refused (chmod 600).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var priv ed25519.PrivateKey
			if keyFile == "" {
				k, _, err := cli.LoadKey(a, "")
				if err != nil {
					return cli.WithCode(cli.ExitUsage, fmt.Errorf("--key not given and %w", err))
				}
				priv = k.Ed25519()
			} else {
				var err error
				if priv, err = loadSigningKey(keyFile); err != nil {
					return cli.UsageErrorf("--key: %v", err)
				}
			}
			data, err := readArgFile(a, args[0])
			if err != nil {
				return err
			}
			out, err := signDescriptor(data, priv)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.Stdout(), string(out))
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "the signing key file (default: the state directory's keys/identity.pem)")
	return cmd
}
