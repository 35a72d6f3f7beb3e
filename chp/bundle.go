package chp

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/govalue"
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
	claim := map[string]any{
		"host_id": hi.HostID, "public_key": hi.PublicKey, "key_id": hi.KeyID,
		"valid_from": nilOr(hi.ValidFrom), "valid_until": nilOr(hi.ValidUntil),
	}
	if len(hi.Anchors) > 0 {
		claim["anchors"] = hi.Anchors
	}
	msg, err := govalue.Marshal(canonical.ChpStableV1, claim)
	if err != nil {
		return nil, err
	}
	hi.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
	return hi, nil
}

func nilOr(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// headerMembers are the members of a bundle's signed header, besides the
// optional completeness claim.
var headerMembers = []string{"host_id", "protocol_version", "created_at", "canonicalization", "root_hash"}

// bundleHeader returns the signed header of a bundle under its
// canonicalization: {host_id, protocol_version, created_at, canonicalization,
// root_hash} plus completeness when present and not an empty object.
func bundleHeader(b canonical.Value) ([]byte, error) {
	h := canonical.Value{Kind: canonical.Object, Obj: make([]canonical.Member, 0, 6)}
	for _, k := range headerMembers {
		h.Obj = append(h.Obj, canonical.Member{Key: k, Value: member(b, k)})
	}
	if c := member(b, "completeness"); c.Kind != canonical.Null && (c.Kind != canonical.Object || len(c.Obj) > 0) {
		h.Obj = append(h.Obj, canonical.Member{Key: "completeness", Value: c})
	}
	switch canon := member(b, "canonicalization"); {
	case canon.Kind == canonical.Null, canon.Kind == canonical.String && canon.Str == Canonicalization:
		return canonical.ChpStableV1.AppendCanonical(nil, h)
	case canon.Kind == canonical.String && canon.Str == CanonicalizationJCS:
		return canonical.ChpJcsV1.AppendCanonical(nil, h)
	default:
		return nil, fmt.Errorf("unknown canonicalization %s", describe(canon))
	}
}

// describe renders a small value for an error message.
func describe(v canonical.Value) string {
	b, err := v.AppendJSON(nil)
	if err != nil || len(b) > 80 {
		return "<" + v.Kind.String() + ">"
	}
	return string(b)
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
	hv, err := govalue.FromGo(hdr)
	if err != nil {
		return err
	}
	msg, err := bundleHeader(hv)
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
	// Bound counts events whose attribution binding holds (event id or,
	// for events sealed by earlier versions, a disclosed payload's BindKey);
	// Unbound those that bind no attribution at all.
	Bound   int `json:"bound_events"`
	Unbound int `json:"unbound_events"`
	// Attribution says, per event, whether its subject, denial, error,
	// sequence, version and correlation are bound (the events up to the
	// first chain failure).
	Attribution []EventAttribution `json:"attribution"`
	Checks      []BundleCheck      `json:"checks"`
	// Warnings do not make a bundle invalid: they say what it does not
	// prove (unbound attribution).
	Warnings []string `json:"warnings,omitempty"`
	Reason   string   `json:"reason,omitempty"`
}

func (v *BundleVerification) add(name string, ok bool, detail string) {
	v.Checks = append(v.Checks, BundleCheck{Name: name, OK: ok, Detail: detail})
}

// structureDetail names what a bundle lacks to be one: an events array, a
// host_id, a root_hash ("" when it has them all).
func structureDetail(events, hostID, rootHash bool) string {
	var missing []string
	if !events {
		missing = append(missing, "events (an array)")
	}
	if !hostID {
		missing = append(missing, "host_id")
	}
	if !rootHash {
		missing = append(missing, "root_hash")
	}
	if len(missing) == 0 {
		return ""
	}
	return "not a CHP evidence bundle: missing " + strings.Join(missing, ", ")
}

// VerifyBundle verifies an exported evidence bundle offline (chp-v0.2.md §2,
// §3, §12, §14): each event's content hash under the scheme it declares,
// chain continuity from genesis, disclosed payloads against their
// commitments, the root hash, the completeness claim, and for the signed
// tier the header signature and the host-identity attestation. It also checks
// capmesh's attribution binding on events that carry one and reports, per
// event, whether its attribution is bound (Attribution, Warnings). It fails closed: any
// malformed input yields Valid=false, never a panic. The error is non-nil
// only when data is not a JSON object at all.
func VerifyBundle(data []byte, opts *VerifyOptions) (*BundleVerification, error) {
	if opts == nil {
		opts = &VerifyOptions{}
	}
	b, err := canonical.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("bundle is not JSON: %w", err)
	}
	if b.Kind != canonical.Object {
		return nil, errors.New("bundle is not a JSON object")
	}
	v := &BundleVerification{}
	top := eventView{b}
	v.Assurance = top.text("assurance")
	v.HostID = top.text("host_id")
	events, _ := b.Get("events")
	ok := events.Kind == canonical.Array
	v.add("structure", ok && v.HostID != "" && member(b, "root_hash").Kind != canonical.Null, structureDetail(ok, v.HostID != "", member(b, "root_hash").Kind != canonical.Null))
	if !ok {
		return v.finish(), nil
	}
	v.EventCount = len(events.Arr)
	ec := v.verifyEvents(events.Arr)
	v.add("root_hash", ec.chainOK && top.text("root_hash") == RootHash(ec.hashes), "")
	if c := member(b, "completeness"); c.Kind != canonical.Null {
		v.add("completeness", completenessHolds(c, events.Arr, ec.chainOK), "")
	}
	v.verifyAssurance(b, opts)
	return v.finish(), nil
}

// eventChecks is what the walk over a bundle's events found: the chain's
// content hashes, and the verdict and first failure of the hash chain, of
// the payload commitments and of the capmesh attribution binding.
type eventChecks struct {
	hashes                                []string
	chainOK, commitOK, bindOK, hasBinding bool
	chainDetail, commitDetail, bindDetail string
}

// verifyEvents walks the events in order: each must hold its content_hash
// and link to the previous one (the walk stops at the first break), a v2
// event's disclosed payload must match its payload_commitment, and each
// event's attribution is recorded. It adds the event_hashes,
// payload_commitments and (when any event is bound) capmesh_binding checks.
func (v *BundleVerification) verifyEvents(rawEvents []canonical.Value) *eventChecks {
	ec := &eventChecks{hashes: make([]string, 0, len(rawEvents)), chainOK: true, commitOK: true, bindOK: true}
	prev := ""
	for i, re := range rawEvents {
		stored, broken := linkedHash(i, re, prev)
		if broken != "" {
			ec.chainOK, ec.chainDetail = false, broken
			break
		}
		ec.hashes = append(ec.hashes, stored)
		prev = stored
		ev := eventView{re}
		if ec.commitOK && !commitmentHolds(ev) {
			ec.commitOK, ec.commitDetail = false, fmt.Sprintf("event %d: disclosed payload does not match payload_commitment", i)
		}
		v.attribute(ec, attribution(ev, i))
	}
	v.attributionWarnings()
	v.add("event_hashes", ec.chainOK, ec.chainDetail)
	v.add("payload_commitments", ec.commitOK, ec.commitDetail)
	if ec.hasBinding {
		v.add("capmesh_binding", ec.bindOK, ec.bindDetail)
	}
	return ec
}

// linkedHash checks event i of a bundle against the previous event's
// content hash prev: it returns the event's content_hash when the event
// carries it, links to prev and hashes to it, else why not.
func linkedHash(i int, re canonical.Value, prev string) (stored, broken string) {
	if re.Kind != canonical.Object {
		return "", fmt.Sprintf("event %d is not an object", i)
	}
	ev := eventView{re}
	stored = ev.text("content_hash")
	if stored == "" {
		return "", fmt.Sprintf("event %d has no content_hash (strict verification)", i)
	}
	storedPrev := ev.text("prev_hash")
	if storedPrev != prev {
		return "", fmt.Sprintf("event %d: prev_hash does not link to the previous event", i)
	}
	s, err := ev.stable()
	if err != nil {
		return "", fmt.Sprintf("event %d: %v", i, err)
	}
	if got := s.contentHash(storedPrev); got != stored {
		return "", fmt.Sprintf("event %d (sequence %s): content_hash mismatch", i, describe(member(re, "sequence")))
	}
	return stored, ""
}

// commitmentHolds reports whether a chp-event-hash-v2 event's disclosed
// payload matches its payload_commitment; a withheld or sealed payload, and
// an event of another scheme, have nothing to match.
func commitmentHolds(ev eventView) bool {
	if ev.text("hash_scheme") != EventHashV2 {
		return true
	}
	p := member(ev.Value, "payload")
	withheld, hasWithheld := p.Get("chp_withheld")
	_, sealed := p.Get("chp_sealed")
	return (hasWithheld && withheld.Kind == canonical.Bool && withheld.Bool) || sealed || ev.payloadMatchesCommitment()
}

// attribute records one event's attribution: its count, and a mismatch as
// the binding's first failure.
func (v *BundleVerification) attribute(ec *eventChecks, a EventAttribution) {
	v.Attribution = append(v.Attribution, a)
	switch a.Attribution {
	case AttributionBound, AttributionPayload:
		v.Bound++
		ec.hasBinding = true
	case AttributionUnbound:
		v.Unbound++
	case AttributionMismatch:
		ec.hasBinding = true
		if ec.bindOK {
			ec.bindOK, ec.bindDetail = false, a.String()
		}
	}
}

// completenessHolds checks a bundle's completeness claim c against its
// events: the known scheme, an intact chain, head_hash naming the last
// event, the same correlation, and as_of_sequence not before the last
// event's sequence.
func completenessHolds(c canonical.Value, rawEvents []canonical.Value, chainOK bool) bool {
	cm := eventView{c}
	if c.Kind != canonical.Object || cm.text("scheme") != CompletenessScheme || len(rawEvents) == 0 || !chainOK {
		return false
	}
	tail := eventView{rawEvents[len(rawEvents)-1]}
	ok := cm.text("head_hash") == tail.text("content_hash")
	if tc := tail.correlationID(); ok && tc != nil {
		id, isStr := c.Get("correlation_id")
		ok = isStr && id.Kind == canonical.String && id.Str == *tc
	}
	if ts := member(tail.Value, "sequence"); ok && ts.Kind == canonical.Number {
		as := member(c, "as_of_sequence")
		a, _ := strconv.ParseInt(as.Str, 10, 64)
		t, _ := strconv.ParseInt(ts.Str, 10, 64)
		ok = as.Kind == canonical.Number && a >= t
	}
	return ok
}

// verifyAssurance checks the bundle's assurance tier: the signature of a
// signed bundle, and RequireSigned against the lower tiers.
func (v *BundleVerification) verifyAssurance(b canonical.Value, opts *VerifyOptions) {
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
}

// attributionWarnings warns about events whose attribution is not bound, or
// bound only by a payload that withholding would remove.
func (v *BundleVerification) attributionWarnings() {
	if v.Unbound > 0 {
		v.Warnings = append(v.Warnings, fmt.Sprintf("%d of %d events bind no attribution: their subject, denial, error and sequence "+
			"are not covered by the hash chain and could have been edited (a reference host's bundle, or older capmesh events "+
			"whose payload is withheld)", v.Unbound, v.EventCount))
	}
	payloadOnly := 0
	for _, a := range v.Attribution {
		if a.Attribution == AttributionPayload {
			payloadOnly++
		}
	}
	if payloadOnly > 0 {
		v.Warnings = append(v.Warnings, fmt.Sprintf("%d events bind attribution only inside their payload (sealed by an "+
			"older capmesh): withholding the payload unbinds them", payloadOnly))
	}
}

func (v *BundleVerification) verifySignature(b canonical.Value, opts *VerifyOptions) {
	top := eventView{b}
	sig := member(b, "signature")
	pubB64 := top.text("public_key")
	if sig.Kind != canonical.Object || pubB64 == "" {
		v.add("signature", false, "signed bundle without signature or public_key")
		return
	}
	pub, err := base64.StdEncoding.DecodeString(pubB64)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		v.add("signature", false, "public_key is not a base64 ed25519 key")
		return
	}
	v.KeyID = KeyID(pub)
	if kid := (eventView{sig}).text("key_id"); kid != v.KeyID {
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
	raw, err := base64.StdEncoding.DecodeString((eventView{sig}).text("signature"))
	v.add("signature", err == nil && ed25519.Verify(pub, msg, raw), "")

	att := member(b, "host_identity")
	if att.Kind != canonical.Object {
		return
	}
	v.add("host_identity", VerifyHostIdentity(att, pubB64, v.HostID, member(b, "created_at")), "")
	for _, a := range member(att, "anchors").Arr {
		if t := member(a, "type"); t.Kind == canonical.String && t.Str == "did" {
			v.add("did_anchor", false, "did anchors are not verified by this version; refusing to claim provenance")
		}
	}
}

// VerifyHostIdentity checks a host-identity attestation (the JSON object of a
// HostIdentity, as decoded by canonical.Parse): its self-signature, that
// it names pubB64 and hostID, and that at falls in its validity window.
func VerifyHostIdentity(att canonical.Value, pubB64, hostID string, at canonical.Value) bool {
	av := eventView{att}
	if pk, _ := av.str("public_key"); pk == nil || *pk != pubB64 {
		return false
	}
	if h, _ := av.str("host_id"); h == nil || *h != hostID {
		return false
	}
	claim := canonical.Value{Kind: canonical.Object}
	for _, k := range []string{"host_id", "public_key", "key_id", "valid_from", "valid_until"} {
		claim.Obj = append(claim.Obj, canonical.Member{Key: k, Value: member(att, k)})
	}
	for _, k := range []string{"anchors", "enc_public_key"} {
		if x, ok := att.Get(k); ok {
			claim.Obj = append(claim.Obj, canonical.Member{Key: k, Value: x})
		}
	}
	msg, err := canonical.ChpStableV1.AppendCanonical(nil, claim)
	if err != nil {
		return false
	}
	pub, err := base64.StdEncoding.DecodeString(pubB64)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return false
	}
	sig, err := base64.StdEncoding.DecodeString(av.text("signature"))
	if err != nil || !ed25519.Verify(pub, msg, sig) {
		return false
	}
	if at.Kind == canonical.String {
		if vf := member(att, "valid_from"); vf.Kind == canonical.String && at.Str < vf.Str {
			return false
		}
		if vu := member(att, "valid_until"); vu.Kind == canonical.String && at.Str > vu.Str {
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
