package witnessing

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/govalue"
	"github.com/capmesh/capmesh/chp"
)

// ErrInvalidWitness is wrapped by every refusal of a chain-witness or
// store-head-anchor statement that does not verify on its own (the
// invalid_witness code); a statement over a head the host does not hold is
// a different error, decided by the host.
var ErrInvalidWitness = errors.New("chp: invalid witness statement")

// MaxStatementSize bounds a witness or anchor statement.
const MaxStatementSize = 64 << 10

// Statement kinds of chp-v0.2.md §12.
const (
	KindChainWitness    = "chain-witness"
	KindStoreHeadAnchor = "store-head-anchor"
)

// WitnessParty is the witness block of a chain-witness statement.
type WitnessParty struct {
	HostID       string          `json:"host_id"`
	PublicKey    string          `json:"public_key"`
	HostIdentity json.RawMessage `json:"host_identity"`
}

// ChainWitness is a peer's countersignature over a host's store head
// (schemas/chain-witness.schema.json).
type ChainWitness struct {
	Kind             string              `json:"kind"`
	HostID           string              `json:"host_id"`
	Sequence         uint64              `json:"sequence"`
	StoreHead        string              `json:"store_head"`
	RevocationHead   string              `json:"revocation_head,omitempty"`
	WitnessedAt      string              `json:"witnessed_at"`
	Canonicalization string              `json:"canonicalization"`
	Witness          WitnessParty        `json:"witness"`
	Signature        chp.BundleSignature `json:"signature"`
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidWitness, fmt.Sprintf(format, args...))
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// strictDecode parses data as one JSON object into v: canonical's parser
// first (duplicate members, bad UTF-8 and trailing data are refused), then
// the struct, with no member v does not name.
func strictDecode(data []byte, v any) (canonical.Value, error) {
	if len(data) > MaxStatementSize {
		return canonical.Value{}, invalidf("over %d bytes", MaxStatementSize)
	}
	tree, err := canonical.Parse(data)
	if err != nil {
		return canonical.Value{}, invalidf("%v", err)
	}
	if tree.Kind != canonical.Object {
		return canonical.Value{}, invalidf("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return canonical.Value{}, invalidf("%v", err)
	}
	return tree, nil
}

// chainWitnessHeader is the witness-signed header: kind, host_id,
// sequence, store_head, witnessed_at, canonicalization, and revocation_head
// when set.
func chainWitnessHeader(tree canonical.Value) ([]byte, error) {
	h := canonical.Value{Kind: canonical.Object}
	for _, k := range []string{"kind", "host_id", "sequence", "store_head", "witnessed_at", "canonicalization"} {
		h.Obj = append(h.Obj, canonical.Member{Key: k, Value: member(tree, k)})
	}
	if r := member(tree, "revocation_head"); r.Kind == canonical.String && r.Str != "" {
		h.Obj = append(h.Obj, canonical.Member{Key: "revocation_head", Value: r})
	}
	return canonical.ChpStableV1.AppendCanonical(nil, h)
}

// ParseChainWitness parses and verifies a chain-witness statement on its
// own: structure, the witness's signature over the header, and the
// witness's self-signed host-identity attestation at witnessed_at. It does
// not compare the head with any store: that is the witnessed host's act.
// Every refusal wraps ErrInvalidWitness.
func ParseChainWitness(data []byte) (*ChainWitness, error) {
	var w ChainWitness
	tree, err := strictDecode(data, &w)
	if err != nil {
		return nil, err
	}
	seq := member(tree, "sequence")
	switch {
	case w.Kind != KindChainWitness:
		return nil, invalidf("kind %q, want %q", w.Kind, KindChainWitness)
	case w.HostID == "":
		return nil, invalidf("host_id is empty")
	case seq.Kind != canonical.Number:
		return nil, invalidf("sequence is not an integer")
	case !isHex64(w.StoreHead):
		return nil, invalidf("store_head is not 64 lowercase hex digits")
	case w.RevocationHead != "" && !isHex64(w.RevocationHead):
		return nil, invalidf("revocation_head is not 64 lowercase hex digits")
	case member(tree, "revocation_head").Kind == canonical.String && w.RevocationHead == "":
		return nil, invalidf("revocation_head is empty")
	case w.WitnessedAt == "":
		return nil, invalidf("witnessed_at is empty")
	case w.Canonicalization != chp.Canonicalization:
		return nil, invalidf("canonicalization %q, want %q", w.Canonicalization, chp.Canonicalization)
	case w.Witness.HostID == "":
		return nil, invalidf("witness.host_id is empty")
	case w.Signature.Algorithm != "ed25519":
		return nil, invalidf("signature algorithm %q, want ed25519", w.Signature.Algorithm)
	}
	pub, err := base64.StdEncoding.DecodeString(w.Witness.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, invalidf("witness.public_key is not a base64 Ed25519 key")
	}
	if w.Signature.KeyID != chp.KeyID(pub) {
		return nil, invalidf("signature key_id %q does not name witness.public_key", w.Signature.KeyID)
	}
	msg, err := chainWitnessHeader(tree)
	if err != nil {
		return nil, invalidf("header: %v", err)
	}
	sig, err := base64.StdEncoding.DecodeString(w.Signature.Signature)
	if err != nil || !ed25519.Verify(pub, msg, sig) {
		return nil, invalidf("signature does not verify")
	}
	att := member(member(tree, "witness"), "host_identity")
	if att.Kind != canonical.Object {
		return nil, invalidf("witness.host_identity is missing: a countersignature must say who witnessed")
	}
	if !chp.VerifyHostIdentity(att, w.Witness.PublicKey, w.Witness.HostID, member(tree, "witnessed_at")) {
		return nil, invalidf("witness.host_identity does not verify for %q at %s", w.Witness.HostID, w.WitnessedAt)
	}
	return &w, nil
}

// NewChainWitness builds and signs a chain-witness statement over hostID's
// head (revocationHead "" omits it) as witnessID with key, at witnessedAt
// (RFC 3339).
func NewChainWitness(hostID string, sequence uint64, storeHead, revocationHead, witnessID string, key ed25519.PrivateKey, witnessedAt string) ([]byte, error) {
	hi, err := chp.NewHostIdentity(witnessID, key, witnessedAt)
	if err != nil {
		return nil, err
	}
	att, err := json.Marshal(hi)
	if err != nil {
		return nil, err
	}
	pub := key.Public().(ed25519.PublicKey)
	w := ChainWitness{Kind: KindChainWitness, HostID: hostID, Sequence: sequence, StoreHead: storeHead,
		RevocationHead: revocationHead, WitnessedAt: witnessedAt, Canonicalization: chp.Canonicalization,
		Witness: WitnessParty{HostID: witnessID, PublicKey: base64.StdEncoding.EncodeToString(pub), HostIdentity: att}}
	raw, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	tree, err := canonical.Parse(raw)
	if err != nil {
		return nil, err
	}
	msg, err := chainWitnessHeader(tree)
	if err != nil {
		return nil, err
	}
	w.Signature = chp.BundleSignature{Algorithm: "ed25519", KeyID: chp.KeyID(pub),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))}
	return json.Marshal(w)
}

// AnchorBlock is the external countersignature of a store-head anchor.
type AnchorBlock struct {
	Type             string `json:"type"`
	DID              string `json:"did"`
	Countersignature string `json:"countersignature"`
}

// StoreHeadAnchor binds a store head to a did:key outside the mesh
// (schemas/store-head-anchor.schema.json).
type StoreHeadAnchor struct {
	Kind            string      `json:"kind"`
	HostID          string      `json:"host_id"`
	Sequence        uint64      `json:"sequence"`
	StoreHead       string      `json:"store_head"`
	AnchoredAt      string      `json:"anchored_at"`
	StoreHeadScheme string      `json:"store_head_scheme,omitempty"`
	Anchor          AnchorBlock `json:"anchor"`
}

// StoreHeadAnchorMessage is what the did:key countersigns:
// chp-stable-v1 of {kind, host_id, sequence, store_head, anchored_at}.
func StoreHeadAnchorMessage(hostID string, sequence uint64, storeHead, anchoredAt string) ([]byte, error) {
	return govalue.Marshal(canonical.ChpStableV1, map[string]any{"kind": KindStoreHeadAnchor,
		"host_id": hostID, "sequence": sequence, "store_head": storeHead, "anchored_at": anchoredAt})
}

// ParseStoreHeadAnchor parses a store-head anchor and verifies its SSHSIG
// countersignature offline against the did:key it names. Only "did"
// anchors are verified; every refusal wraps ErrInvalidWitness.
func ParseStoreHeadAnchor(data []byte) (*StoreHeadAnchor, error) {
	var a StoreHeadAnchor
	tree, err := strictDecode(data, &a)
	if err != nil {
		return nil, err
	}
	switch {
	case a.Kind != KindStoreHeadAnchor:
		return nil, invalidf("kind %q, want %q", a.Kind, KindStoreHeadAnchor)
	case a.HostID == "":
		return nil, invalidf("host_id is empty")
	case member(tree, "sequence").Kind != canonical.Number:
		return nil, invalidf("sequence is not an integer")
	case !isHex64(a.StoreHead):
		return nil, invalidf("store_head is not 64 lowercase hex digits")
	case a.AnchoredAt == "":
		return nil, invalidf("anchored_at is empty")
	case a.StoreHeadScheme != "" && a.StoreHeadScheme != StoreHeadV1 && a.StoreHeadScheme != StoreHeadV2:
		return nil, invalidf("unknown store_head_scheme %q", a.StoreHeadScheme)
	case a.Anchor.Type != "did":
		return nil, invalidf("anchor type %q is not verified by this version (only did)", a.Anchor.Type)
	}
	pub, err := DIDKeyPublicKey(a.Anchor.DID)
	if err != nil {
		return nil, invalidf("%v", err)
	}
	msg, err := StoreHeadAnchorMessage(a.HostID, a.Sequence, a.StoreHead, a.AnchoredAt)
	if err != nil {
		return nil, invalidf("%v", err)
	}
	if err := VerifySSHSIG(a.Anchor.Countersignature, msg, AnchorNamespace, pub); err != nil {
		return nil, invalidf("countersignature: %v", err)
	}
	return &a, nil
}

// member returns an object's member, Null when absent (or v not an object).
func member(v canonical.Value, key string) canonical.Value {
	if m, ok := v.Get(key); ok {
		return m
	}
	return canonical.Value{Kind: canonical.Null}
}
