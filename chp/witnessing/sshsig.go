package witnessing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// ErrSSHSIG is wrapped by every SSHSIG and did:key refusal.
var ErrSSHSIG = errors.New("chp: bad SSHSIG countersignature")

const (
	sshsigArmorBegin = "-----BEGIN SSH SIGNATURE-----"
	sshsigArmorEnd   = "-----END SSH SIGNATURE-----"
	sshEd25519       = "ssh-ed25519"
	maxSSHSIG        = 8 << 10
)

// AnchorNamespace is the SSHSIG namespace of a store-head anchor
// (chp-v0.2.md §12 External anchoring).
const AnchorNamespace = "chp-store-head-anchor"

// sshString appends an SSH wire string (uint32 length, bytes).
func sshString(dst, s []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// readSSHString takes one SSH wire string off b.
func readSSHString(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n], b[4+n:], true
}

// sshsigSignedData is the blob an SSHSIG signature covers
// (OpenSSH PROTOCOL.sshsig).
func sshsigSignedData(namespace, hashAlg string, msg []byte) ([]byte, error) {
	var digest []byte
	switch hashAlg {
	case "sha512":
		d := sha512.Sum512(msg)
		digest = d[:]
	case "sha256":
		d := sha256.Sum256(msg)
		digest = d[:]
	default:
		return nil, fmt.Errorf("%w: hash algorithm %q", ErrSSHSIG, hashAlg)
	}
	out := []byte("SSHSIG")
	out = sshString(out, []byte(namespace))
	out = sshString(out, nil)
	out = sshString(out, []byte(hashAlg))
	return sshString(out, digest), nil
}

// VerifySSHSIG checks an armored SSHSIG signature over msg under namespace
// by the Ed25519 key pub. Only ssh-ed25519 signatures are accepted.
func VerifySSHSIG(armored string, msg []byte, namespace string, pub ed25519.PublicKey) error {
	if len(armored) > maxSSHSIG {
		return fmt.Errorf("%w: over %d bytes", ErrSSHSIG, maxSSHSIG)
	}
	body := strings.TrimSpace(armored)
	if !strings.HasPrefix(body, sshsigArmorBegin) || !strings.HasSuffix(body, sshsigArmorEnd) {
		return fmt.Errorf("%w: not an armored SSH signature", ErrSSHSIG)
	}
	body = strings.Join(strings.Fields(body[len(sshsigArmorBegin):len(body)-len(sshsigArmorEnd)]), "")
	blob, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return fmt.Errorf("%w: armor is not base64", ErrSSHSIG)
	}
	if !bytes.HasPrefix(blob, []byte("SSHSIG")) || len(blob) < 10 || binary.BigEndian.Uint32(blob[6:]) != 1 {
		return fmt.Errorf("%w: not an SSHSIG v1 blob", ErrSSHSIG)
	}
	rest := blob[10:]
	var fields [5][]byte
	for i := range fields {
		var ok bool
		if fields[i], rest, ok = readSSHString(rest); !ok {
			return fmt.Errorf("%w: truncated blob", ErrSSHSIG)
		}
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: trailing bytes", ErrSSHSIG)
	}
	keyBlob, ns, hashAlg, sigBlob := fields[0], fields[1], fields[3], fields[4]
	want := sshString(sshString(nil, []byte(sshEd25519)), pub)
	if !bytes.Equal(keyBlob, want) {
		return fmt.Errorf("%w: signed by another key", ErrSSHSIG)
	}
	if string(ns) != namespace {
		return fmt.Errorf("%w: namespace %q, want %q", ErrSSHSIG, ns, namespace)
	}
	alg, sigRest, ok := readSSHString(sigBlob)
	if !ok || string(alg) != sshEd25519 {
		return fmt.Errorf("%w: not an ssh-ed25519 signature", ErrSSHSIG)
	}
	sig, sigRest, ok := readSSHString(sigRest)
	if !ok || len(sigRest) != 0 || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: malformed ssh-ed25519 signature", ErrSSHSIG)
	}
	signed, err := sshsigSignedData(namespace, string(hashAlg), msg)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, signed, sig) {
		return fmt.Errorf("%w: signature does not verify", ErrSSHSIG)
	}
	return nil
}

// SignSSHSIG produces an armored SSHSIG (sha512) over msg under namespace
// with key, as `ssh-keygen -Y sign` does.
func SignSSHSIG(key ed25519.PrivateKey, msg []byte, namespace string) (string, error) {
	signed, err := sshsigSignedData(namespace, "sha512", msg)
	if err != nil {
		return "", err
	}
	pub := key.Public().(ed25519.PublicKey)
	blob := []byte("SSHSIG")
	blob = binary.BigEndian.AppendUint32(blob, 1)
	blob = sshString(blob, sshString(sshString(nil, []byte(sshEd25519)), pub))
	blob = sshString(blob, []byte(namespace))
	blob = sshString(blob, nil)
	blob = sshString(blob, []byte("sha512"))
	blob = sshString(blob, sshString(sshString(nil, []byte(sshEd25519)), ed25519.Sign(key, signed)))
	b64 := base64.StdEncoding.EncodeToString(blob)
	var sb strings.Builder
	sb.WriteString(sshsigArmorBegin + "\n")
	for len(b64) > 70 {
		sb.WriteString(b64[:70] + "\n")
		b64 = b64[70:]
	}
	sb.WriteString(b64 + "\n" + sshsigArmorEnd + "\n")
	return sb.String(), nil
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// DIDKeyPublicKey decodes an Ed25519 did:key (multibase base58btc "z",
// multicodec 0xed01) to its raw public key.
func DIDKeyPublicKey(did string) (ed25519.PublicKey, error) {
	enc, ok := strings.CutPrefix(did, "did:key:z")
	if !ok || len(enc) == 0 || len(enc) > 64 {
		return nil, fmt.Errorf("%w: %q is not a base58btc did:key", ErrSSHSIG, did)
	}
	n := new(big.Int)
	for _, c := range []byte(enc) {
		i := strings.IndexByte(base58Alphabet, c)
		if i < 0 {
			return nil, fmt.Errorf("%w: did:key has a non-base58 character", ErrSSHSIG)
		}
		n.Mul(n, big.NewInt(58))
		n.Add(n, big.NewInt(int64(i)))
	}
	raw := n.Bytes()
	for _, c := range []byte(enc) {
		if c != '1' {
			break
		}
		raw = append([]byte{0}, raw...)
	}
	if len(raw) != 2+ed25519.PublicKeySize || raw[0] != 0xed || raw[1] != 0x01 {
		return nil, fmt.Errorf("%w: did:key is not an Ed25519 key", ErrSSHSIG)
	}
	return ed25519.PublicKey(raw[2:]), nil
}

// DIDKey encodes an Ed25519 public key as a did:key.
func DIDKey(pub ed25519.PublicKey) string {
	raw := append([]byte{0xed, 0x01}, pub...)
	n := new(big.Int).SetBytes(raw)
	var out []byte
	mod := new(big.Int)
	for n.Sign() > 0 {
		n.DivMod(n, big.NewInt(58), mod)
		out = append(out, base58Alphabet[mod.Int64()])
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return "did:key:z" + string(out)
}
