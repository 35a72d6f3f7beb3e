package keyscmd

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/identity"
)

// NewKeys is `capmesh keys`: generate, show and use the host's identity
// key.
func NewKeys(a cli.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Generate, show and use this host's Ed25519 identity key",
		Long: `keys manages the Ed25519 key that identifies this host: the key that signs
its evidence bundles, announcements and descriptors.

The key lives in the state directory ($XDG_STATE_HOME/capmesh/keys/identity.pem,
or under --data-dir) as a PKCS#8 PEM file with mode 0600. Commands refuse a
key file that others can read.

Binary values are written as standard base64 by default; --encoding selects
hex or base64url. Public keys and signatures are read in any of the three.

'capmesh descriptor sign' signs with this key by default (or --key FILE);
'keys export --seed' prints the secret seed for tools that want it raw.`,
	}
	cmd.AddCommand(newKeysGenerateCmd(a), newKeysShowCmd(a), newKeysSignCmd(a), newKeysVerifyCmd(a), newKeysExportCmd(a))
	return cmd
}

// keysInfo is what generate and show report (--json).
type keysInfo struct {
	Path          string `json:"path"`
	Algorithm     string `json:"algorithm"`
	PublicKey     string `json:"public_key"`
	PublicKeyHex  string `json:"public_key_hex"`
	KeyID         string `json:"key_id"`
	Created       bool   `json:"created,omitempty"`
	ReplacedKeyID string `json:"replaced_key_id,omitempty"`
}

func newKeysInfo(path string, pub identity.PublicKey) keysInfo {
	return keysInfo{Path: path, Algorithm: "ed25519", PublicKey: pub.Base64(), PublicKeyHex: pub.Hex(), KeyID: pub.KeyID()}
}

func (i keysInfo) print(w io.Writer) {
	fmt.Fprintf(w, "path:        %s\n", i.Path)
	fmt.Fprintf(w, "algorithm:   %s\n", i.Algorithm)
	fmt.Fprintf(w, "public key:  %s\n", i.PublicKey)
	fmt.Fprintf(w, "public hex:  %s\n", i.PublicKeyHex)
	fmt.Fprintf(w, "key id:      %s (CHP key_id: first 16 hex digits of sha256(public key))\n", i.KeyID)
}

func keysWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func keysReadInput(a cli.Env, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(a.Stdin())
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read message: %w", err)
	}
	return data, nil
}

func keysOutputEncoding(hint string) (identity.Encoding, error) {
	enc, err := identity.ParseEncoding(hint)
	if err != nil || (enc != identity.Base64 && enc != identity.Hex && enc != identity.Base64URL) {
		return 0, cli.UsageErrorf("--encoding %q: want base64, hex or base64url", hint)
	}
	return enc, nil
}

func newKeysGenerateCmd(a cli.Env) *cobra.Command {
	var out string
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Create a new random identity key",
		Long: `generate creates a random Ed25519 key and writes it with mode 0600 to --out,
or to the default key path in the state directory. It refuses to replace an
existing key unless --force is given: replacing a key changes the host's
identity, and whatever trusted the old key stops trusting this host.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := cli.KeyPath(a, out)
			if err != nil {
				return err
			}
			k, err := identity.Generate()
			if err != nil {
				return err
			}
			info := newKeysInfo(path, k.Public())
			info.Created = true
			if force {
				if old, err := identity.Load(path); err == nil {
					info.ReplacedKeyID = old.Public().KeyID()
				}
				err = k.SaveReplace(path)
			} else {
				err = k.Save(path)
			}
			if errors.Is(err, fs.ErrExist) {
				existing := ""
				if old, lerr := identity.Load(path); lerr == nil {
					existing = fmt.Sprintf(" (key id %s)", old.Public().KeyID())
				}
				return fmt.Errorf("a key already exists at %s%s; keep it, or pass --force to replace it (the host's identity changes)", path, existing)
			}
			if err != nil {
				return err
			}
			a.Log().Debug("generated identity key", "path", path, "key_id", info.KeyID)
			if asJSON {
				return keysWriteJSON(a.Stdout(), info)
			}
			if info.ReplacedKeyID != "" {
				fmt.Fprintf(a.Stdout(), "generated ed25519 key %s, replacing key %s\n", info.KeyID, info.ReplacedKeyID)
			} else {
				fmt.Fprintf(a.Stdout(), "generated ed25519 key %s\n", info.KeyID)
			}
			info.print(a.Stdout())
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to write the key (default: the state directory's keys/identity.pem)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing key")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newKeysShowCmd(a cli.Env) *cobra.Command {
	var keyPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the public key and key id of a key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, path, err := cli.LoadKey(a, keyPath)
			if err != nil {
				return err
			}
			info := newKeysInfo(path, k.Public())
			if asJSON {
				return keysWriteJSON(a.Stdout(), info)
			}
			info.print(a.Stdout())
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "key file (default: the state directory's keys/identity.pem)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newKeysSignCmd(a cli.Env) *cobra.Command {
	var keyPath, encoding string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sign [flags] FILE|-",
		Short: "Sign a file's bytes (or stdin) and print the signature",
		Long: `sign signs the exact bytes of FILE (or of stdin for -) with pure Ed25519
(RFC 8032) and prints the 64-byte signature in --encoding.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			enc, err := keysOutputEncoding(encoding)
			if err != nil {
				return err
			}
			k, _, err := cli.LoadKey(a, keyPath)
			if err != nil {
				return err
			}
			msg, err := keysReadInput(a, args[0])
			if err != nil {
				return err
			}
			sig := identity.Encode(k.Sign(msg), enc)
			if asJSON {
				return keysWriteJSON(a.Stdout(), map[string]any{
					"signature": sig, "encoding": enc.String(), "algorithm": "ed25519",
					"public_key": k.Public().Base64(), "key_id": k.Public().KeyID(), "message_bytes": len(msg),
				})
			}
			fmt.Fprintln(a.Stdout(), sig)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "key file (default: the state directory's keys/identity.pem)")
	cmd.Flags().StringVar(&encoding, "encoding", "base64", "signature encoding: base64, hex or base64url")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// keysDecodeFixed reads a key or signature in --encoding, or in whichever
// of hex, base64 and base64url its length shows.
func keysDecodeFixed(flag, value string, size int, encoding string) ([]byte, error) {
	if encoding == "" {
		b, _, err := identity.DecodeAny(value, size)
		if err != nil {
			return nil, cli.UsageErrorf("--%s: %v", flag, err)
		}
		return b, nil
	}
	enc, err := keysOutputEncoding(encoding)
	if err != nil {
		return nil, err
	}
	b, err := identity.Decode(value, enc)
	if err != nil {
		return nil, cli.UsageErrorf("--%s: %v", flag, err)
	}
	return b, nil
}

func newKeysVerifyCmd(a cli.Env) *cobra.Command {
	var pubFlag, sigFlag, encoding string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify --public-key KEY --signature SIG [flags] FILE|-",
		Short: "Check an Ed25519 signature over a file's bytes (or stdin)",
		Long: `verify checks SIG over the exact bytes of FILE (or of stdin for -) with the
public key KEY. Both are read in --encoding if given, otherwise in hex,
base64 or base64url as their length shows.

Verification is strict, as in libsodium: small-order and non-canonical
public keys and non-canonical signatures are rejected. It exits 0 when the
signature is valid, 1 when it is not, 2 when KEY or SIG cannot be decoded.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pubFlag == "" || sigFlag == "" {
				return cli.UsageErrorf("--public-key and --signature are required")
			}
			rawPub, err := keysDecodeFixed("public-key", pubFlag, ed25519.PublicKeySize, encoding)
			if err != nil {
				return err
			}
			sig, err := keysDecodeFixed("signature", sigFlag, ed25519.SignatureSize, encoding)
			if err != nil {
				return err
			}
			msg, err := keysReadInput(a, args[0])
			if err != nil {
				return err
			}
			var keyID string
			pub, verr := identity.ParsePublicKey(rawPub)
			if verr == nil {
				keyID = pub.KeyID()
				verr = pub.Verify(msg, sig)
			}
			if asJSON {
				rep := map[string]any{"valid": verr == nil, "algorithm": "ed25519"}
				if keyID != "" {
					rep["key_id"] = keyID
				}
				if verr != nil {
					rep["error"] = verr.Error()
				}
				if err := keysWriteJSON(a.Stdout(), rep); err != nil {
					return err
				}
				if verr != nil {
					return cli.SilentExit(cli.ExitFailure)
				}
				return nil
			}
			if verr != nil {
				if errors.Is(verr, identity.ErrInvalidPublicKey) {
					return fmt.Errorf("public key rejected: %w", verr)
				}
				return fmt.Errorf("signature does not verify: %w", verr)
			}
			fmt.Fprintf(a.Stdout(), "signature OK (key id %s)\n", keyID)
			return nil
		},
	}
	cmd.Flags().StringVar(&pubFlag, "public-key", "", "the signer's public key (hex, base64 or base64url)")
	cmd.Flags().StringVar(&sigFlag, "signature", "", "the signature (hex, base64 or base64url)")
	cmd.Flags().StringVar(&encoding, "encoding", "", "read the key and signature in this encoding only: base64, hex or base64url")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newKeysExportCmd(a cli.Env) *cobra.Command {
	var keyPath, encoding string
	var seed bool
	cmd := &cobra.Command{
		Use:   "export --seed [flags]",
		Short: "Print the key's secret 32-byte Ed25519 seed",
		Long: `export --seed prints the 32-byte Ed25519 seed of the key (the whole secret:
anyone who has it can sign as this host) in --encoding, base64 by default
or hex, for tools that take a raw seed. 'capmesh descriptor sign --key' and
the CHP reference's host_ed25519 file read the base64 form. Write it only
to a file with mode 0600; a warning goes to stderr.`,
		Example: `  (umask 077; capmesh keys export --seed > seed.b64)`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !seed {
				return cli.UsageErrorf("export prints the secret seed only when asked: pass --seed")
			}
			var enc identity.Encoding
			switch encoding {
			case "base64":
				enc = identity.Base64
			case "hex":
				enc = identity.Hex
			default:
				return cli.UsageErrorf("--encoding %q: want base64 or hex", encoding)
			}
			k, path, err := cli.LoadKey(a, keyPath)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.Stderr(), "capmesh: warning: printing the SECRET seed of key %s (%s); anyone who has it can sign as this host: keep it in a 0600 file and never share it\n", k.Public().KeyID(), path)
			fmt.Fprintln(a.Stdout(), identity.Encode(k.Ed25519().Seed(), enc))
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "key file (default: the state directory's keys/identity.pem)")
	cmd.Flags().BoolVar(&seed, "seed", false, "print the secret seed (required)")
	cmd.Flags().StringVar(&encoding, "encoding", "base64", "seed encoding: base64 or hex")
	return cmd
}
