package chp

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf16"
)

// KeyID is the CHP key id of an ed25519 public key: the first 16 hex digits of
// sha256(public key) (chp-v0.2.md §3).
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])[:16]
}

// NewHostIdentity builds the self-signed host-identity attestation binding
// hostID to key, valid from validFrom (RFC 3339) with no end.
func NewHostIdentity(hostID string, key ed25519.PrivateKey, validFrom string) (*HostIdentity, error) {
	pub := key.Public().(ed25519.PublicKey)
	hi := &HostIdentity{
		HostID:    hostID,
		KeyID:     KeyID(pub),
		PublicKey: base64.StdEncoding.EncodeToString(pub),
		ValidFrom: &validFrom,
	}
	msg, err := attestationClaim(hi)
	if err != nil {
		return nil, err
	}
	hi.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
	return hi, nil
}

// attestationClaim is chp-stable-v1({host_id, public_key, key_id, valid_from,
// valid_until[, anchors]}); anchors participate only when present.
func attestationClaim(hi *HostIdentity) ([]byte, error) {
	claim := map[string]any{
		"host_id": hi.HostID, "public_key": hi.PublicKey, "key_id": hi.KeyID,
		"valid_from": nilOr(hi.ValidFrom), "valid_until": nilOr(hi.ValidUntil),
	}
	if len(hi.Anchors) > 0 {
		claim["anchors"] = hi.Anchors
	}
	return stableCanon(nil, claim, true)
}

func nilOr(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// bundleHeader returns the signed header of a bundle under its
// canonicalization: {host_id, protocol_version, created_at, canonicalization,
// root_hash} plus completeness when present.
func bundleHeader(b map[string]any) ([]byte, error) {
	h := map[string]any{}
	for _, k := range []string{"host_id", "protocol_version", "created_at", "canonicalization", "root_hash"} {
		h[k] = b[k]
	}
	if c, ok := b["completeness"]; ok && c != nil {
		if m, isMap := c.(map[string]any); !isMap || len(m) > 0 {
			h["completeness"] = c
		}
	}
	switch canon, _ := b["canonicalization"].(string); canon {
	case "", Canonicalization:
		return stableCanon(nil, h, true)
	case CanonicalizationJCS:
		return jcsCanon(nil, h)
	default:
		return nil, fmt.Errorf("unknown canonicalization %q", canon)
	}
}

// jcsCanon renders v as RFC 8785 JCS restricted to CHP content (no floats).
func jcsCanon(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendJCSString(dst, x), nil
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return dst, errFloat
		}
		return append(dst, x...), nil
	case int, int64, uint64:
		return fmt.Appendf(dst, "%d", x), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = jcsCanon(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return utf16Less(keys[i], keys[j]) })
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJCSString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = jcsCanon(dst, x[k]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case json.RawMessage:
		val, err := decodeJSON(x)
		if err != nil {
			return dst, err
		}
		return jcsCanon(dst, val)
	default:
		return dst, fmt.Errorf("chp-jcs-v1: unsupported Go type %T", v)
	}
}

func utf16Less(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func appendJCSString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			dst = append(dst, '\\', '"')
		case c == '\\':
			dst = append(dst, '\\', '\\')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c < 0x20:
			dst = appendU(dst, rune(c))
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// SignBundle promotes an unsigned bundle to the signed tier with key: it
// attaches the public key, a host-identity attestation valid from the
// bundle's created_at, and the ed25519 signature over the canonical header.
func SignBundle(b *EvidenceBundle, key ed25519.PrivateKey) error {
	pub := key.Public().(ed25519.PublicKey)
	hi, err := NewHostIdentity(b.HostID, key, b.CreatedAt)
	if err != nil {
		return err
	}
	b.Assurance = "signed"
	b.PublicKey = base64.StdEncoding.EncodeToString(pub)
	b.HostIdentity = hi
	hdr := map[string]any{
		"host_id": b.HostID, "protocol_version": b.ProtocolVersion, "created_at": b.CreatedAt,
		"canonicalization": b.Canonicalization, "root_hash": b.RootHash,
	}
	if b.Completeness != nil {
		hdr["completeness"] = map[string]any{
			"as_of_sequence": b.Completeness.AsOfSequence, "correlation_id": b.Completeness.CorrelationID,
			"head_hash": b.Completeness.HeadHash, "scheme": b.Completeness.Scheme,
		}
	}
	msg, err := bundleHeader(hdr)
	if err != nil {
		return err
	}
	b.Signature = &BundleSignature{Algorithm: "ed25519", KeyID: KeyID(pub), Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))}
	return nil
}

// VerifyOptions tunes VerifyBundle. A nil *VerifyOptions means defaults.
type VerifyOptions struct {
	// ExpectedKeyID, when set, rejects a bundle signed by any other key.
	ExpectedKeyID string
	// RequireSigned rejects bundles below the signed tier.
	RequireSigned bool
}

// BundleCheck is one named verification step.
type BundleCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// BundleVerification is the verdict of VerifyBundle.
type BundleVerification struct {
	Valid      bool   `json:"valid"`
	Assurance  string `json:"assurance"`
	HostID     string `json:"host_id"`
	KeyID      string `json:"key_id,omitempty"`
	EventCount int    `json:"event_count"`
	// Bound counts events carrying capmesh's field binding (BindKey).
	Bound  int           `json:"bound_events"`
	Checks []BundleCheck `json:"checks"`
	Reason string        `json:"reason,omitempty"`
}

func (v *BundleVerification) add(name string, ok bool, detail string) {
	v.Checks = append(v.Checks, BundleCheck{Name: name, OK: ok, Detail: detail})
}

// VerifyBundle verifies an exported evidence bundle offline (chp-v0.2.md §2,
// §3, §12, §14): each event's content hash under the scheme it declares,
// chain continuity from genesis, disclosed payloads against their
// commitments, the root hash, the completeness claim, and for the signed
// tier the header signature and the host-identity attestation. It also checks
// capmesh's field binding on events that carry one. It fails closed: any
// malformed input yields Valid=false, never a panic. The error is non-nil
// only when data is not a JSON object at all.
func VerifyBundle(data []byte, opts *VerifyOptions) (*BundleVerification, error) {
	if opts == nil {
		opts = &VerifyOptions{}
	}
	top, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("bundle is not JSON: %w", err)
	}
	b, ok := top.(map[string]any)
	if !ok {
		return nil, errors.New("bundle is not a JSON object")
	}
	v := &BundleVerification{}
	v.Assurance, _ = b["assurance"].(string)
	v.HostID, _ = b["host_id"].(string)
	rawEvents, ok := b["events"].([]any)
	v.add("structure", ok && v.HostID != "" && b["root_hash"] != nil, "")
	if !ok {
		return v.finish(), nil
	}
	v.EventCount = len(rawEvents)

	hashes := make([]string, 0, len(rawEvents))
	chainOK, commitOK, bindOK := true, true, true
	var chainDetail, commitDetail, bindDetail string
	prev := ""
	for i, re := range rawEvents {
		m, isMap := re.(map[string]any)
		if !isMap {
			chainOK, chainDetail = false, fmt.Sprintf("event %d is not an object", i)
			break
		}
		ev := eventView(m)
		stored, _ := ev["content_hash"].(string)
		if stored == "" {
			chainOK, chainDetail = false, fmt.Sprintf("event %d has no content_hash (strict verification)", i)
			break
		}
		storedPrev, _ := ev["prev_hash"].(string)
		if storedPrev != prev {
			chainOK, chainDetail = false, fmt.Sprintf("event %d: prev_hash does not link to the previous event", i)
			break
		}
		s, err := ev.stable()
		if err != nil {
			chainOK, chainDetail = false, fmt.Sprintf("event %d: %v", i, err)
			break
		}
		if got := s.contentHash(storedPrev); got != stored {
			chainOK, chainDetail = false, fmt.Sprintf("event %d (sequence %v): content_hash mismatch", i, ev["sequence"])
			break
		}
		hashes = append(hashes, stored)
		prev = stored
		if scheme, _ := ev["hash_scheme"].(string); scheme == EventHashV2 && commitOK {
			p, _ := ev["payload"].(map[string]any)
			_, withheld := p["chp_withheld"]
			_, sealed := p["chp_sealed"]
			if !(withheld && p["chp_withheld"] == true) && !sealed {
				c, err := stableCanon(nil, payloadOrEmpty(ev["payload"]), false)
				if err != nil || sha256Hex(c) != ev["payload_commitment"] {
					commitOK, commitDetail = false, fmt.Sprintf("event %d: disclosed payload does not match payload_commitment", i)
				}
			}
		}
		if mism, has, err := checkBinding(ev); has {
			v.Bound++
			if (err != nil || len(mism) > 0) && bindOK {
				bindOK = false
				if err != nil {
					bindDetail = fmt.Sprintf("event %d: %v", i, err)
				} else {
					bindDetail = fmt.Sprintf("event %d (sequence %v): %s edited after sealing", i, ev["sequence"], strings.Join(mism, ", "))
				}
			}
		}
	}
	v.add("event_hashes", chainOK, chainDetail)
	v.add("payload_commitments", commitOK, commitDetail)
	if v.Bound > 0 {
		v.add("capmesh_binding", bindOK, bindDetail)
	}
	root, _ := b["root_hash"].(string)
	v.add("root_hash", chainOK && root == RootHash(hashes), "")

	if c, present := b["completeness"]; present && c != nil {
		cm, _ := c.(map[string]any)
		ok := cm != nil && cm["scheme"] == CompletenessScheme && len(rawEvents) > 0 && chainOK
		if ok {
			tail := rawEvents[len(rawEvents)-1].(map[string]any)
			ok = cm["head_hash"] == tail["content_hash"]
			if tc, _ := tail["correlation"].(map[string]any); ok && tc != nil && tc["correlation_id"] != nil {
				ok = cm["correlation_id"] == tc["correlation_id"]
			}
			if ts, isNum := tail["sequence"].(json.Number); ok && isNum {
				as, isNum2 := cm["as_of_sequence"].(json.Number)
				a, _ := as.Int64()
				t, _ := ts.Int64()
				ok = isNum2 && a >= t
			}
		}
		v.add("completeness", ok, "")
	}

	switch v.Assurance {
	case "signed":
		v.verifySignature(b, opts)
	case "hash-chain", "none":
		if opts.RequireSigned {
			v.add("assurance", false, "bundle is "+v.Assurance+", signed required")
		}
	default:
		v.add("assurance", false, fmt.Sprintf("unknown assurance tier %q", v.Assurance))
	}
	return v.finish(), nil
}

func (v *BundleVerification) verifySignature(b map[string]any, opts *VerifyOptions) {
	sig, _ := b["signature"].(map[string]any)
	pubB64, _ := b["public_key"].(string)
	if sig == nil || pubB64 == "" {
		v.add("signature", false, "signed bundle without signature or public_key")
		return
	}
	pub, err := base64.StdEncoding.DecodeString(pubB64)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		v.add("signature", false, "public_key is not a base64 ed25519 key")
		return
	}
	v.KeyID = KeyID(pub)
	if kid, _ := sig["key_id"].(string); kid != v.KeyID {
		v.add("key_id", false, fmt.Sprintf("signature key_id %q does not name public_key (%s)", kid, v.KeyID))
	}
	if opts.ExpectedKeyID != "" && v.KeyID != opts.ExpectedKeyID {
		v.add("expected_key", false, fmt.Sprintf("signed by %s, expected %s", v.KeyID, opts.ExpectedKeyID))
	}
	msg, err := bundleHeader(b)
	if err != nil {
		v.add("signature", false, err.Error())
		return
	}
	s, _ := sig["signature"].(string)
	raw, err := base64.StdEncoding.DecodeString(s)
	v.add("signature", err == nil && ed25519.Verify(pub, msg, raw), "")

	att, _ := b["host_identity"].(map[string]any)
	if att == nil {
		return
	}
	v.add("host_identity", verifyAttestation(att, pubB64, v.HostID, b["created_at"]), "")
	if anchors, _ := att["anchors"].([]any); len(anchors) > 0 {
		for _, a := range anchors {
			if am, _ := a.(map[string]any); am != nil && am["type"] == "did" {
				v.add("did_anchor", false, "did anchors are not verified by this version; refusing to claim provenance")
			}
		}
	}
}

// verifyAttestation checks a host-identity attestation's self-signature, that
// it names pubB64 and hostID, and that at falls in its validity window.
func verifyAttestation(att map[string]any, pubB64, hostID string, at any) bool {
	if att["public_key"] != pubB64 || att["host_id"] != hostID {
		return false
	}
	claim := map[string]any{}
	for _, k := range []string{"host_id", "public_key", "key_id", "valid_from", "valid_until"} {
		claim[k] = att[k]
	}
	for _, k := range []string{"anchors", "enc_public_key"} {
		if x, ok := att[k]; ok {
			claim[k] = x
		}
	}
	msg, err := stableCanon(nil, claim, true)
	if err != nil {
		return false
	}
	pub, err := base64.StdEncoding.DecodeString(pubB64)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return false
	}
	s, _ := att["signature"].(string)
	sig, err := base64.StdEncoding.DecodeString(s)
	if err != nil || !ed25519.Verify(pub, msg, sig) {
		return false
	}
	if ts, ok := at.(string); ok {
		if vf, ok := att["valid_from"].(string); ok && ts < vf {
			return false
		}
		if vu, ok := att["valid_until"].(string); ok && ts > vu {
			return false
		}
	}
	return true
}

func (v *BundleVerification) finish() *BundleVerification {
	v.Valid = len(v.Checks) > 0
	var failed []string
	for _, c := range v.Checks {
		if !c.OK {
			v.Valid = false
			failed = append(failed, c.Name)
		}
	}
	if !v.Valid {
		v.Reason = "failed: " + strings.Join(failed, ", ")
	}
	return v
}
