package chp

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/capmesh/capmesh/canonical"
)

// Mandates (chp-v0.2.md §10, proposals 0002, 0007, 0009, 0026): a principal's
// signed, expiring, capability-scoped grant to a named delegate, optionally
// sub-delegated into an attenuation-only chain, and withdrawn early by a
// mandate-revocation statement. Everything here verifies offline.

// MandateMaxDepth is the deepest sub-delegation chain accepted: a root
// mandate has depth 0, each embedded parent adds one.
const MandateMaxDepth = 8

// MaxMandateBytes bounds the encoded size of a presented mandate (with its
// embedded parents) and of a revocation statement.
const MaxMandateBytes = 256 << 10

// ErrBadMandate wraps every reason ParseMandate and ParseMandateRevocation
// reject a statement.
var ErrBadMandate = errors.New("malformed mandate")

// StatementPrincipal is the principal block of a mandate or a revocation:
// whose authority, under which key, attested by which host identity.
type StatementPrincipal struct {
	HostID    string
	PublicKey string // base64 ed25519
	identity  canonical.Value
}

// StatementSignature is the signature block of a mandate or a revocation.
type StatementSignature struct {
	Algorithm string
	KeyID     string
	Signature string
}

// Mandate is a parsed mandate; Parent is its embedded parent (sub-delegation)
// or nil for a root.
type Mandate struct {
	MandateID      string
	DelegateID     string
	Scope          []string
	ValidFrom      time.Time // zero when absent
	ValidUntil     time.Time
	CreatedAt      string
	MaxInvocations int64 // 0: uncapped
	Depth          int64 // 0 for a root
	ParentID       string
	Principal      StatementPrincipal
	Signature      StatementSignature
	Parent         *Mandate

	hasValidFrom bool
	raw          canonical.Value
}

// ParseMandate decodes a presented mandate, its embedded parents included. It
// checks shape and types only — VerifyMandate decides validity. A chain deeper
// than MandateMaxDepth, a member of the wrong type, or input over
// MaxMandateBytes is an error wrapping ErrBadMandate.
func ParseMandate(raw []byte) (*Mandate, error) {
	if len(raw) > MaxMandateBytes {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBadMandate, MaxMandateBytes)
	}
	v, err := canonical.ParseWith(raw, &canonical.ParseOptions{MaxDepth: 4 * (MandateMaxDepth + 2), MaxBytes: MaxMandateBytes})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMandate, err)
	}
	return mandateFrom(v, 0)
}

func mandateFrom(v canonical.Value, level int) (*Mandate, error) {
	if level > MandateMaxDepth {
		return nil, fmt.Errorf("%w: chain deeper than %d", ErrBadMandate, MandateMaxDepth)
	}
	if v.Kind != canonical.Object {
		return nil, fmt.Errorf("%w: a mandate is a JSON object, got %s", ErrBadMandate, v.Kind)
	}
	r := fieldReader{v: v}
	if k := r.str("kind", true); k != "mandate" && r.err == nil {
		return nil, fmt.Errorf("%w: kind %q, want \"mandate\"", ErrBadMandate, k)
	}
	m := &Mandate{raw: v}
	m.MandateID = r.str("mandate_id", true)
	m.DelegateID = r.str("delegate_id", true)
	m.Scope = r.strings("scope")
	m.ValidUntil, _ = r.time("valid_until", true)
	m.ValidFrom, m.hasValidFrom = r.time("valid_from", false)
	m.CreatedAt = r.str("created_at", true)
	if c := r.str("canonicalization", true); c != Canonicalization && r.err == nil {
		r.fail("canonicalization %q is not %s", c, Canonicalization)
	}
	m.MaxInvocations = r.positive("max_invocations")
	m.ParentID = r.str("parent_id", false)
	m.Depth = r.positive("depth")
	m.Principal = r.principal()
	m.Signature = r.signature()
	if r.err != nil {
		return nil, r.err
	}
	if (m.ParentID != "") != (m.Depth != 0) {
		return nil, fmt.Errorf("%w: parent_id and depth go together", ErrBadMandate)
	}
	p := member(v, "parent")
	switch {
	case p.Kind == canonical.Null && m.ParentID != "":
		return nil, fmt.Errorf("%w: parent_id %q without the embedded parent", ErrBadMandate, m.ParentID)
	case p.Kind != canonical.Null:
		parent, err := mandateFrom(p, level+1)
		if err != nil {
			return nil, fmt.Errorf("parent: %w", err)
		}
		m.Parent = parent
	}
	return m, nil
}

// RootPrincipal is the principal host id at the root of m's chain (m's own
// for a single-hop mandate).
func (m *Mandate) RootPrincipal() string {
	for m.Parent != nil {
		m = m.Parent
	}
	return m.Principal.HostID
}

// header is the signed header: kind … canonicalization, plus depth and
// parent_id when parent_id is set and max_invocations when present, each
// as presented.
func (m *Mandate) header() ([]byte, error) {
	keys := []string{"kind", "mandate_id", "delegate_id", "scope", "valid_from", "valid_until", "created_at", "canonicalization"}
	if m.ParentID != "" {
		keys = append(keys, "depth", "parent_id")
	}
	if m.MaxInvocations != 0 {
		keys = append(keys, "max_invocations")
	}
	return signedHeader(m.raw, keys)
}

func signedHeader(v canonical.Value, keys []string) ([]byte, error) {
	h := canonical.Value{Kind: canonical.Object, Obj: make([]canonical.Member, 0, len(keys))}
	for _, k := range keys {
		h.Obj = append(h.Obj, canonical.Member{Key: k, Value: member(v, k)})
	}
	return canonical.ChpStableV1.AppendCanonical(nil, h)
}

// MandateVerifyOptions is what gate 5 verifies a mandate against.
type MandateVerifyOptions struct {
	// At is host time: the validity window of every link must hold at At.
	At time.Time
	// Delegate, when not empty, is the transport-verified caller the leaf
	// mandate must name as delegate_id.
	Delegate string
	// Revoked reports whether a known revocation, verified under
	// principalKey, withdraws mandateID. Nil: nothing is revoked.
	Revoked func(mandateID, principalKey string) bool
}

// MandateVerification is VerifyMandate's verdict: Valid only when every
// check of every link passed; Checks lists the leaf's, with parent_valid
// standing for the rest of the chain (whose failure is in its Detail).
type MandateVerification struct {
	Valid  bool
	Checks []BundleCheck
	Reason string
}

func (v *MandateVerification) add(name string, ok bool, detail string) {
	v.Checks = append(v.Checks, BundleCheck{Name: name, OK: ok, Detail: detail})
}

func (v *MandateVerification) finish() *MandateVerification {
	v.Valid = len(v.Checks) > 0
	var failed []string
	for _, c := range v.Checks {
		if !c.OK {
			v.Valid = false
			failed = append(failed, c.Name)
		}
	}
	if !v.Valid {
		v.Reason = "mandate checks failed: " + strings.Join(failed, ", ")
	}
	return v
}

// CheckMap renders the checks as {name: ok}, for denial details.
func (v *MandateVerification) CheckMap() map[string]any {
	out := make(map[string]any, len(v.Checks))
	for _, c := range v.Checks {
		out[c.Name] = c.OK
	}
	return out
}

// VerifyMandate verifies m offline (chp-v0.2.md §10): the header signature
// under the principal's key, the principal's attestation, the validity
// window at opts.At, the delegate binding, revocation, and — for a
// sub-mandate — every link's attenuation of its parent (depth, parent_id,
// the delegate join, scope and window narrowing, the use cap lowering) down
// to the root. Scope against a capability is not checked here (an
// out-of-scope call is policy_blocked, not an invalid mandate).
func VerifyMandate(m *Mandate, opts MandateVerifyOptions) *MandateVerification {
	v := &MandateVerification{}
	verifyLink(v, m, opts)
	if opts.Delegate != "" {
		v.add("delegate", m.DelegateID == opts.Delegate,
			fmt.Sprintf("delegate_id %q, transport-verified caller %q", m.DelegateID, opts.Delegate))
	}
	return v.finish()
}

func verifyLink(v *MandateVerification, m *Mandate, opts MandateVerifyOptions) {
	pub, sigOK := statementSignature(m.Principal, m.Signature)
	if sigOK {
		msg, err := m.header()
		sig, derr := base64.StdEncoding.DecodeString(m.Signature.Signature)
		sigOK = err == nil && derr == nil && ed25519.Verify(pub, msg, sig)
	}
	v.add("signature", sigOK, "")
	v.add("principal_identity", m.Principal.identity.Kind == canonical.Object &&
		VerifyHostIdentity(m.Principal.identity, m.Principal.PublicKey, m.Principal.HostID, stringValue(m.CreatedAt)), "")
	inWindow := !opts.At.Before(m.ValidFrom) && !opts.At.After(m.ValidUntil)
	v.add("temporal", inWindow, fmt.Sprintf("host time %s, window [%s, %s]",
		FormatTime(opts.At), FormatTime(m.ValidFrom), FormatTime(m.ValidUntil)))
	if opts.Revoked != nil {
		v.add("not_revoked", !opts.Revoked(m.MandateID, m.Principal.PublicKey), "")
	}
	p := m.Parent
	if p == nil {
		return
	}
	v.add("depth", m.Depth == p.Depth+1 && m.Depth <= MandateMaxDepth,
		fmt.Sprintf("depth %d under a parent of depth %d", m.Depth, p.Depth))
	v.add("parent_id_match", m.ParentID == p.MandateID, "")
	v.add("delegate_join", p.DelegateID == m.Principal.HostID,
		fmt.Sprintf("parent delegates to %q, child principal is %q", p.DelegateID, m.Principal.HostID))
	v.add("attenuation_scope", scopeNarrows(m.Scope, p.Scope), "")
	v.add("attenuation_window", (!p.hasValidFrom || (m.hasValidFrom && !m.ValidFrom.Before(p.ValidFrom))) &&
		!m.ValidUntil.After(p.ValidUntil), "")
	v.add("attenuation_cap", p.MaxInvocations == 0 || (m.MaxInvocations != 0 && m.MaxInvocations <= p.MaxInvocations), "")
	pv := &MandateVerification{}
	verifyLink(pv, p, MandateVerifyOptions{At: opts.At, Revoked: opts.Revoked})
	pv.finish()
	v.add("parent_valid", pv.Valid, pv.Reason)
}

// statementSignature decodes the principal key and checks the signature
// block names it (algorithm ed25519, key_id the key's).
func statementSignature(p StatementPrincipal, s StatementSignature) (ed25519.PublicKey, bool) {
	pub, err := base64.StdEncoding.DecodeString(p.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, false
	}
	return pub, s.Algorithm == "ed25519" && s.KeyID == KeyID(pub)
}

// MandateScopeAllows reports whether capabilityID is within a mandate scope
// (chp-http-binding.md §2 grammar: an exact id, or a prefix ending in "*").
// An empty scope allows nothing.
func MandateScopeAllows(scope []string, capabilityID string) bool {
	for _, s := range scope {
		if s == capabilityID || (strings.HasSuffix(s, "*") && strings.HasPrefix(capabilityID, s[:len(s)-1])) {
			return true
		}
	}
	return false
}

// scopeNarrows reports whether every entry of child is within parent: an
// exact id the parent allows, or a prefix the parent's prefix covers.
func scopeNarrows(child, parent []string) bool {
	if len(child) == 0 {
		return false
	}
	for _, c := range child {
		if !MandateScopeAllows(parent, c) {
			return false
		}
	}
	return true
}

// MandateRevocation is a parsed mandate-revocation statement.
type MandateRevocation struct {
	MandateID string
	RevokedAt string
	Reason    string
	Principal StatementPrincipal
	Signature StatementSignature

	raw canonical.Value
}

// ParseMandateRevocation decodes a mandate-revocation statement (shape and
// types only; VerifyMandateRevocation decides validity).
func ParseMandateRevocation(raw []byte) (*MandateRevocation, error) {
	if len(raw) > MaxMandateBytes {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBadMandate, MaxMandateBytes)
	}
	v, err := canonical.ParseWith(raw, &canonical.ParseOptions{MaxDepth: 8, MaxBytes: MaxMandateBytes})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMandate, err)
	}
	if v.Kind != canonical.Object {
		return nil, fmt.Errorf("%w: a revocation is a JSON object, got %s", ErrBadMandate, v.Kind)
	}
	r := fieldReader{v: v}
	if k := r.str("kind", true); k != "mandate-revocation" && r.err == nil {
		return nil, fmt.Errorf("%w: kind %q, want \"mandate-revocation\"", ErrBadMandate, k)
	}
	s := &MandateRevocation{raw: v}
	s.MandateID = r.str("mandate_id", true)
	s.RevokedAt = r.str("revoked_at", true)
	s.Reason = r.str("reason", false)
	if c := r.str("canonicalization", true); c != Canonicalization && r.err == nil {
		r.fail("canonicalization %q is not %s", c, Canonicalization)
	}
	s.Principal = r.principal()
	s.Signature = r.signature()
	if r.err != nil {
		return nil, r.err
	}
	return s, nil
}

// VerifyMandateRevocation checks a revocation's self-consistency: its header
// signature under its principal's key and that key's attestation. Whether it
// withdraws a given mandate is decided by key match (Revokes): a statement
// signed by any key but the mandate's principal's revokes nothing.
func VerifyMandateRevocation(s *MandateRevocation) error {
	pub, ok := statementSignature(s.Principal, s.Signature)
	if !ok {
		return errors.New("signature block does not name an ed25519 principal key")
	}
	msg, err := signedHeader(s.raw, []string{"kind", "mandate_id", "revoked_at", "reason", "canonicalization"})
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(s.Signature.Signature)
	if err != nil || !ed25519.Verify(pub, msg, sig) {
		return errors.New("signature does not verify under the principal key")
	}
	if s.Principal.identity.Kind != canonical.Object ||
		!VerifyHostIdentity(s.Principal.identity, s.Principal.PublicKey, s.Principal.HostID, stringValue(s.RevokedAt)) {
		return errors.New("principal attestation does not verify")
	}
	return nil
}

// Revokes reports whether s — already verified — withdraws the mandate
// mandateID issued under principalKey (the issuer-only rule).
func (s *MandateRevocation) Revokes(mandateID, principalKey string) bool {
	return s.MandateID == mandateID && s.Principal.PublicKey == principalKey
}

// fieldReader reads typed members of an object, keeping the first error.
type fieldReader struct {
	v   canonical.Value
	err error
}

func (r *fieldReader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrBadMandate, fmt.Sprintf(format, a...))
	}
}

func (r *fieldReader) str(key string, required bool) string {
	x := member(r.v, key)
	switch {
	case x.Kind == canonical.String && (x.Str != "" || !required):
		return x.Str
	case x.Kind == canonical.Null && !required:
		return ""
	case x.Kind == canonical.Null || x.Kind == canonical.String:
		r.fail("%s is required", key)
	default:
		r.fail("%s is a %s, want a string", key, x.Kind)
	}
	return ""
}

func (r *fieldReader) strings(key string) []string {
	x := member(r.v, key)
	if x.Kind != canonical.Array {
		r.fail("%s must be an array of strings", key)
		return nil
	}
	out := make([]string, 0, len(x.Arr))
	for _, e := range x.Arr {
		if e.Kind != canonical.String {
			r.fail("%s must be an array of strings", key)
			return nil
		}
		out = append(out, e.Str)
	}
	return out
}

func (r *fieldReader) time(key string, required bool) (time.Time, bool) {
	s := r.str(key, required)
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		r.fail("%s %q is not an RFC 3339 time", key, s)
		return time.Time{}, false
	}
	return t, true
}

// positive reads an optional integer ≥ 1 (0 when absent).
func (r *fieldReader) positive(key string) int64 {
	x := member(r.v, key)
	if x.Kind == canonical.Null {
		return 0
	}
	n, err := strconv.ParseInt(x.Str, 10, 64)
	if x.Kind != canonical.Number || err != nil || n < 1 {
		r.fail("%s must be an integer ≥ 1", key)
		return 0
	}
	return n
}

func (r *fieldReader) principal() StatementPrincipal {
	p := member(r.v, "principal")
	if p.Kind != canonical.Object {
		r.fail("principal must be an object")
		return StatementPrincipal{}
	}
	pr := fieldReader{v: p}
	out := StatementPrincipal{HostID: pr.str("host_id", true), PublicKey: pr.str("public_key", true), identity: member(p, "host_identity")}
	if pr.err != nil {
		r.fail("principal: %v", pr.err)
	}
	return out
}

func (r *fieldReader) signature() StatementSignature {
	s := member(r.v, "signature")
	if s.Kind != canonical.Object {
		r.fail("signature must be an object")
		return StatementSignature{}
	}
	sr := fieldReader{v: s}
	out := StatementSignature{Algorithm: sr.str("algorithm", true), KeyID: sr.str("key_id", false), Signature: sr.str("signature", true)}
	if sr.err != nil {
		r.fail("signature: %v", sr.err)
	}
	return out
}
