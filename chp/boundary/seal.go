package boundary

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
)

// The evidence sealer: it turns one event of an invocation into the bytes the
// store keeps and the hashes that chain it, in one pass, without encoding/json
// on the hot path.
//
// Four forms of each event are written, all with sorted keys:
//
//   - the stored event: compact JSON, every string chp-stable-v1-escaped
//     (ASCII only), so a verifier that decodes it reads exactly the strings
//     that were hashed;
//   - the canonical payload (chp-stable-v1), whose sha256 is the
//     payload_commitment;
//   - the attribution object (chp.AttributionDigest: the event without
//     content_hash, event_id, payload and prev_hash), whose sha256 ends the
//     event id;
//   - the stable object (chp-v0.2.md §2), whose sha256 is the content_hash.
//
// Everything that does not depend on the event's place in the store is
// written before the store's lock is taken (pendingEvent). Under the lock,
// SealTo adds the sequence (which the attribution object covers), the
// attribution digest and with it the event id, the content hash and the
// chain link.
//
// Per invocation, the parts shared by all its events (the correlation and
// the subject, stored and canonical) are rendered once (header).

// assurancePrefix opens every stored event: the fixed assurance metadata
// (DefaultAssurance) and the capability_id key.
const assurancePrefix = `{"assurance":{"evidence_policy":"local-append-only","level":"S1","notes":[]},"capability_id":`

// invHeader holds what every event of one invocation shares.
type invHeader struct {
	corr     []byte // stored correlation object
	corrC    []byte // the correlation object, canonical
	subject  []byte // stored subject object (compact)
	subjectC []byte // the subject object, canonical
	corrID   []byte // chp-stable-v1 string of the correlation id
	invID    []byte // chp-stable-v1 string of the invocation id
}

// subjectInfo is a subject's stored and canonical forms.
type subjectInfo struct {
	stored []byte
	canon  []byte
}

// subjectCache remembers the rendering of recent subjects: most callers
// present one of a few subjects, and parsing plus hashing one costs more than
// the rest of an event.
type subjectCache struct {
	mu sync.RWMutex
	m  map[string]subjectInfo
}

const subjectCacheSize = 1024

func (c *subjectCache) get(raw []byte) (subjectInfo, error) {
	if string(raw) == chp.LocalSubject {
		return localSubjectInfo()
	}
	c.mu.RLock()
	si, ok := c.m[string(raw)]
	c.mu.RUnlock()
	if ok {
		return si, nil
	}
	si, err := renderSubject(raw)
	if err != nil {
		return si, err
	}
	c.mu.Lock()
	if len(c.m) >= subjectCacheSize {
		clear(c.m)
	}
	c.m[string(raw)] = si
	c.mu.Unlock()
	return si, nil
}

// renderSubject returns a subject's stored and canonical forms (the latter
// as chp.AttributionDigest renders it: floats as Python does).
func renderSubject(raw []byte) (subjectInfo, error) {
	var si subjectInfo
	v, err := canonical.Parse(raw)
	if err != nil {
		return si, err
	}
	if v.Kind != canonical.Object {
		return si, fmt.Errorf("subject is a %s, want an object", v.Kind)
	}
	if si.stored, err = v.AppendJSON(nil); err != nil {
		return si, err
	}
	if si.canon, err = canonical.PythonSortKeys.AppendCanonical(nil, v); err != nil {
		return si, err
	}
	return si, nil
}

// localSubjectInfo is the rendering of chp.LocalSubject, the subject of most
// calls made in process.
var localSubjectInfo = sync.OnceValues(func() (subjectInfo, error) { return renderSubject([]byte(chp.LocalSubject)) })

// header renders the invocation-wide parts of its events. It fails only for
// a subject or baggage that is not a JSON object (ParseEnvelope rejects
// those earlier; an envelope built in Go may carry anything).
func (b *Boundary) header(inv *invocation, env *chp.InvocationEnvelope, caller *Caller) (invHeader, error) {
	var h invHeader
	var si subjectInfo
	var err error
	if caller != nil && caller.info != nil {
		si = *caller.info
	} else if si, err = b.subjects.get(env.Subject); err != nil {
		return h, fmt.Errorf("%w: subject: %v", chp.ErrBadEnvelope, err)
	}
	h.subject, h.subjectC = si.stored, si.canon
	c := &env.Correlation
	if len(c.CorrelationID) > evidence.MaxCorrelationID {
		return h, fmt.Errorf("%w: correlation_id longer than %d bytes", chp.ErrBadEnvelope, evidence.MaxCorrelationID)
	}
	st := inv.stage()
	// The correlation, stored (d.k) and canonical (d.c, in st.scratch).
	d := dual{k: st.hdr[:0], c: st.scratch[:0]}
	if err := d.correlation(c); err != nil {
		return h, err
	}
	buf := d.k
	n := len(buf)
	buf = append(buf, d.c...)
	st.scratch = d.c[:0]
	m := len(buf)
	buf = canonical.AppendChpStableString(buf, c.CorrelationID)
	o := len(buf)
	buf = canonical.AppendChpStableString(buf, env.InvocationID)
	h.corr, h.corrC, h.corrID, h.invID = buf[:n:n], buf[n:m:m], buf[m:o:o], buf[o:]
	st.hdr = buf
	return h, nil
}

// correlation writes a correlation object (whose baggage, when not {}, is
// parsed strictly: it must be a JSON object).
func (d *dual) correlation(c *chp.CorrelationContext) error {
	d.rawString("{")
	if len(c.Baggage) > 0 {
		d.sep(`"baggage": `, `"baggage":`)
		if string(c.Baggage) == "{}" {
			d.rawString("{}")
		} else {
			v, err := canonical.Parse(c.Baggage)
			if err != nil || v.Kind != canonical.Object {
				return fmt.Errorf("%w: correlation.baggage must be a JSON object", chp.ErrBadEnvelope)
			}
			if d.k, err = v.AppendJSON(d.k); err == nil {
				d.c, err = canonical.PythonSortKeys.AppendCanonical(d.c, v)
			}
			if err != nil {
				return fmt.Errorf("%w: correlation.baggage: %v", chp.ErrBadEnvelope, err)
			}
		}
		d.sep(", ", ",")
	}
	d.sep(`"causation_id": `, `"causation_id":`)
	d.nullable(c.CausationID)
	d.sep(`, "correlation_id": `, `,"correlation_id":`)
	d.str(c.CorrelationID)
	if c.Environment != "" {
		d.sep(`, "environment": `, `,"environment":`)
		d.str(c.Environment)
	}
	d.sep(`, "parent_correlation_id": `, `,"parent_correlation_id":`)
	d.nullable(c.ParentCorrelationID)
	d.sep(`, "trace_id": `, `,"trace_id":`)
	d.nullable(c.TraceID)
	d.rawString("}")
	return nil
}

// evt is one evidence event to emit.
type evt struct {
	typ     string
	outcome chp.Outcome
	// uri adds "capability_uri": uri to the payload (the common case, so
	// most events need no map).
	uri     string
	payload map[string]any
	denial  *chp.DenialReason
	err     *chp.ErrorInfo
}

// sealer is one event ready to be placed: every byte except those that
// depend on its sequence and predecessor, staged in its invocation's stage.
type sealer struct {
	inv *invocation
	// unique is the event id's random part; idx its place in inv.ids,
	// which SealTo sets to the whole (bound) event id.
	unique string
	idx    int
	// Segments of inv.st.buf, as end offsets. The stored event: up to the
	// content hash (from start), the event id, prev_hash, the sequence,
	// the end (tail). The attribution object: up to the sequence, the end.
	// The stable object: up to the event id, prev_hash, the end.
	start, head, idPos, prevPos, seqPos, tail int32
	attrSeq, attrEnd                          int32
	stableID, stablePrev, stableEnd           int32
	sealed                                    bool
	err                                       error
}

// stage holds what an invocation's events need while they are staged and
// sealed: one pool round trip per invocation, not several per event.
type stage struct {
	buf     []byte   // the staged events, back to back
	scratch []byte   // an event's canonical payload while it is staged; the hashed forms while it is sealed
	hdr     []byte   // the invocation-wide parts of its events (invHeader)
	hash    [64]byte // the content hash of the event sealed last
}

var stagePool = sync.Pool{New: func() any {
	return &stage{buf: make([]byte, 0, 8<<10), scratch: make([]byte, 0, 2<<10), hdr: make([]byte, 0, 512)}
}}

// stage returns the invocation's stage, taking one from the pool first.
func (inv *invocation) stage() *stage {
	if inv.st == nil {
		inv.st = stagePool.Get().(*stage)
	}
	return inv.st
}

// releaseStage returns the stage to the pool, once no sealer of the
// invocation can run any more and its header is no longer read.
func (inv *invocation) releaseStage() {
	st := inv.st
	if st == nil {
		return
	}
	inv.st = nil
	if cap(st.buf) > 256<<10 || cap(st.scratch) > 64<<10 || cap(st.hdr) > 64<<10 {
		return // let an outsized stage go
	}
	st.buf, st.scratch, st.hdr = st.buf[:0], st.scratch[:0], st.hdr[:0]
	stagePool.Put(st)
}

// errSealedTwice guards the staged bytes: a store must seal each Pending
// once.
var errSealedTwice = errors.New("boundary: evidence event sealed twice")

// SealTo implements evidence.Sealer: it renders the event at sequence seq,
// chained to prev ("" = first), appending the stored bytes to dst (the
// store's own buffer). A sealer seals once.
func (s *sealer) SealTo(dst []byte, seq uint64, prev string) ([]byte, []byte, error) {
	if s.err != nil {
		return nil, dst, s.err
	}
	if s.sealed || s.inv.st == nil {
		return nil, dst, errSealedTwice
	}
	s.sealed = true
	st := s.inv.st
	buf := st.buf
	var num [20]byte
	seqB := strconv.AppendUint(num[:0], seq, 10)
	// The attribution digest, and with it the event id.
	x := append(st.scratch[:0], buf[s.tail:s.attrSeq]...)
	x = append(x, seqB...)
	x = append(x, buf[s.attrSeq:s.attrEnd]...)
	sum := sha256.Sum256(x)
	var idBuf [96]byte // "evt_" + 32 hex + the marker + 64 hex fit
	idB := append(idBuf[:0], s.unique...)
	idB = append(idB, chp.IDBindMarker...)
	idB = hex.AppendEncode(idB, sum[:])
	id := string(idB)
	s.inv.ids[s.idx] = id

	hash := &st.hash
	x = append(x[:0], buf[s.attrEnd:s.stableID]...)
	x = append(x, '"')
	x = append(x, id...) // ASCII: "evt_", hex, the marker
	x = append(x, '"')
	x = append(x, buf[s.stableID:s.stablePrev]...)
	if prev == "" {
		x = append(x, "null"...)
	} else {
		x = canonical.AppendChpStableString(x, prev)
	}
	x = append(x, buf[s.stablePrev:s.stableEnd]...)
	sum = sha256.Sum256(x)
	hex.Encode(hash[:], sum[:])
	st.scratch = x[:0]

	data := slices.Grow(dst, int(s.tail-s.start)+64+len(id)+len(prev)+len(seqB)+8)
	data = append(data, buf[s.start:s.head]...)
	data = append(data, hash[:]...)
	data = append(data, buf[s.head:s.idPos]...)
	data = append(data, '"')
	data = append(data, id...)
	data = append(data, '"')
	data = append(data, buf[s.idPos:s.prevPos]...)
	if prev == "" {
		data = append(data, "null"...)
	} else {
		data = canonical.AppendChpStableString(data, prev)
	}
	data = append(data, buf[s.prevPos:s.seqPos]...)
	data = append(data, seqB...)
	data = append(data, buf[s.seqPos:s.tail]...)
	return hash[:], data, nil
}

// pendingEvent prepares one event of inv for the store: id is the random
// part of its event id, idx the id's place in inv.ids. It stages the
// event's three forms (stageStored, stageAttribution, stageStable); an
// event that cannot be rendered carries its error to SealTo.
func (b *Boundary) pendingEvent(inv *invocation, id string, idx int, e evt) evidence.Pending {
	s := inv.newSealer()
	s.inv, s.unique, s.idx = inv, id, idx
	pending := evidence.Pending{CorrelationID: inv.env.Correlation.CorrelationID, EventType: e.typ, Sealer: s}
	inv.lastTS = b.now()
	var f staged
	if s.err = f.members(&e); s.err != nil {
		return pending
	}
	st := inv.stage()
	buf, err := b.stageStored(st, s, inv, &e, &f)
	if err != nil {
		s.err = err
		st.buf = buf[:s.start]
		return pending
	}
	buf = b.stageAttribution(buf, s, &inv.hdr, &f)
	st.buf = b.stageStable(buf, s, &inv.hdr, &f)
	return pending
}

// capabilityID is the capability_id recorded for inv: the resolved
// capability's, or the envelope's before resolution.
func (inv *invocation) capabilityID() string {
	id := inv.env.CapabilityID
	if inv.cap != nil {
		id = inv.cap.desc.ID
	}
	if id != "" {
		return id
	}
	// The schema requires a non-empty capability_id on events; an
	// invocation that named none is recorded under this marker
	// (docs/DECISIONS.md).
	return "<missing>"
}

// staged locates, in an event's staged bytes, the members its attribution
// and stable objects repeat (as [start, end) offsets of the stored event),
// and holds the others.
type staged struct {
	cap, ver, typ, out [2]int
	commit, ts         [2]int
	denial, err        []byte // the stored denial and error members (nil: null)
	denialC, errC      []byte // their canonical forms
}

// members renders e's denial and error members, stored and canonical.
func (f *staged) members(e *evt) error {
	var err error
	if e.denial != nil {
		if f.denial, f.denialC, err = memberJSON(e.denial); err != nil {
			return err
		}
	}
	if e.err != nil {
		f.err, f.errC, err = memberJSON(e.err)
	}
	return err
}

// stageStored appends the stored event of e to st.buf, split around the
// content hash, the event id, prev_hash and the sequence, and locates in f
// what the other forms repeat. On error the returned buffer holds the
// partial event from s.start.
func (b *Boundary) stageStored(st *stage, s *sealer, inv *invocation, e *evt, f *staged) ([]byte, error) {
	h := &inv.hdr
	buf := st.buf
	s.start = int32(len(buf))
	// Up to the content hash.
	buf = append(buf, assurancePrefix...)
	f.cap[0] = len(buf)
	buf = canonical.AppendChpStableString(buf, inv.capabilityID())
	f.cap[1] = len(buf)
	buf = append(buf, `,"capability_version":`...)
	f.ver[0] = len(buf)
	buf = appendNullableString(buf, inv.version)
	f.ver[1] = len(buf)
	buf = append(buf, `,"content_hash":"`...)
	s.head = int32(len(buf))
	// Up to the event id.
	buf = append(buf, `","correlation":`...)
	buf = append(buf, h.corr...)
	buf = append(buf, `,"denial":`...)
	buf = appendRawOrNull(buf, f.denial)
	buf = append(buf, `,"error":`...)
	buf = appendRawOrNull(buf, f.err)
	buf = append(buf, `,"event_id":`...)
	s.idPos = int32(len(buf))
	// Up to prev_hash.
	buf = append(buf, `,"event_type":`...)
	f.typ[0] = len(buf)
	buf = canonical.AppendChpStableString(buf, e.typ)
	f.typ[1] = len(buf)
	buf = append(buf, `,"hash_scheme":"`+chp.EventHashV2+`","host_id":`...)
	buf = append(buf, b.hostStr...)
	buf = append(buf, `,"invocation_id":`...)
	buf = append(buf, h.invID...)
	buf = append(buf, `,"outcome":`...)
	f.out[0] = len(buf)
	if e.outcome == "" {
		buf = append(buf, "null"...)
	} else {
		buf = canonical.AppendChpStableString(buf, string(e.outcome))
	}
	f.out[1] = len(buf)
	buf, err := stagePayload(st, buf, e, f)
	if err != nil {
		return buf, err
	}
	buf = append(buf, `","prev_hash":`...)
	s.prevPos = int32(len(buf))
	// Up to the sequence, and the end.
	buf = append(buf, `,"redacted":true,"sequence":`...)
	s.seqPos = int32(len(buf))
	buf = append(buf, `,"subject":`...)
	buf = append(buf, h.subject...)
	buf = append(buf, `,"timestamp":"`...)
	f.ts[0] = len(buf)
	buf = chp.AppendTime(buf, inv.lastTS)
	f.ts[1] = len(buf)
	buf = append(buf, `"}`...)
	s.tail = int32(len(buf))
	return buf, nil
}

// stagePayload appends the payload member and the payload commitment
// (open: its closing quote is the caller's) to the stored event in buf:
// the compact form in place, the canonical form aside in st.scratch,
// hashed at once into the commitment.
func stagePayload(st *stage, buf []byte, e *evt, f *staged) ([]byte, error) {
	buf = append(buf, `,"payload":`...)
	d := dual{c: st.scratch[:0], k: buf}
	err := appendPayload(&d, e)
	st.scratch = d.c[:0]
	if err != nil {
		return buf, err
	}
	buf = d.k
	sum := sha256.Sum256(d.c)
	buf = append(buf, `,"payload_commitment":"`...)
	f.commit[0] = len(buf)
	buf = hex.AppendEncode(buf, sum[:])
	f.commit[1] = len(buf)
	return buf, nil
}

// stageAttribution appends the event's attribution object (see
// chp.AttributionDigest), split around the sequence.
func (b *Boundary) stageAttribution(buf []byte, s *sealer, h *invHeader, f *staged) []byte {
	buf = append(buf, `{"assurance": {"evidence_policy": "local-append-only", "level": "S1", "notes": []}, "capability_id": `...)
	buf = append(buf, buf[f.cap[0]:f.cap[1]]...)
	buf = append(buf, `, "capability_version": `...)
	buf = append(buf, buf[f.ver[0]:f.ver[1]]...)
	buf = append(buf, `, "correlation": `...)
	buf = append(buf, h.corrC...)
	buf = append(buf, `, "denial": `...)
	buf = appendRawOrNull(buf, f.denialC)
	buf = append(buf, `, "error": `...)
	buf = appendRawOrNull(buf, f.errC)
	buf = append(buf, `, "event_type": `...)
	buf = append(buf, buf[f.typ[0]:f.typ[1]]...)
	buf = append(buf, `, "hash_scheme": "`+chp.EventHashV2+`", "host_id": `...)
	buf = append(buf, b.hostStr...)
	buf = append(buf, `, "invocation_id": `...)
	buf = append(buf, h.invID...)
	buf = append(buf, `, "outcome": `...)
	buf = append(buf, buf[f.out[0]:f.out[1]]...)
	buf = append(buf, `, "payload_commitment": "`...)
	buf = append(buf, buf[f.commit[0]:f.commit[1]]...)
	buf = append(buf, `", "redacted": true, "sequence": `...)
	s.attrSeq = int32(len(buf))
	buf = append(buf, `, "subject": `...)
	buf = append(buf, h.subjectC...)
	buf = append(buf, `, "timestamp": "`...)
	buf = append(buf, buf[f.ts[0]:f.ts[1]]...)
	buf = append(buf, `"}`...)
	s.attrEnd = int32(len(buf))
	return buf
}

// stageStable appends the event's stable object (chp-v0.2.md §2, v2),
// split around the event id and prev_hash.
func (b *Boundary) stageStable(buf []byte, s *sealer, h *invHeader, f *staged) []byte {
	buf = append(buf, `{"capability_id": `...)
	buf = append(buf, buf[f.cap[0]:f.cap[1]]...)
	buf = append(buf, `, "correlation_id": `...)
	buf = append(buf, h.corrID...)
	buf = append(buf, `, "event_id": `...)
	s.stableID = int32(len(buf))
	buf = append(buf, `, "event_type": `...)
	buf = append(buf, buf[f.typ[0]:f.typ[1]]...)
	buf = append(buf, `, "host_id": `...)
	buf = append(buf, b.hostStr...)
	buf = append(buf, `, "invocation_id": `...)
	buf = append(buf, h.invID...)
	buf = append(buf, `, "outcome": `...)
	buf = append(buf, buf[f.out[0]:f.out[1]]...)
	buf = append(buf, `, "payload_commitment": "`...)
	buf = append(buf, buf[f.commit[0]:f.commit[1]]...)
	buf = append(buf, `", "prev_hash": `...)
	s.stablePrev = int32(len(buf))
	buf = append(buf, `, "timestamp": "`...)
	buf = append(buf, buf[f.ts[0]:f.ts[1]]...)
	buf = append(buf, `"}`...)
	s.stableEnd = int32(len(buf))
	return buf
}

// dual writes a payload twice in one pass: its chp-stable-v1 form (c, which
// is hashed) and the compact form stored in the event (k): the same tokens
// without the spaces of ", " and ": ".
type dual struct{ c, k []byte }

func (d *dual) sep(canon, compact string) { d.c, d.k = append(d.c, canon...), append(d.k, compact...) }

func (d *dual) rawString(b string) { d.c, d.k = append(d.c, b...), append(d.k, b...) }

func (d *dual) nullable(s *string) {
	if s == nil {
		d.rawString("null")
		return
	}
	d.str(*s)
}

func (d *dual) str(s string) {
	n := len(d.c)
	d.c = canonical.AppendChpStableString(d.c, s)
	d.k = append(d.k, d.c[n:]...)
}

// value writes a generic payload value: canonical by package canonical,
// then compacted.
func (d *dual) value(v any) error {
	n := len(d.c)
	var err error
	if d.c, err = appendStableValue(d.c, v); err != nil {
		return err
	}
	d.k = canonical.CompactChpStable(d.k, d.c[n:])
	return nil
}

// appendPayload writes e's payload in both forms.
func appendPayload(d *dual, e *evt) error {
	var keys []string
	if len(e.payload) > 0 {
		keys = make([]string, 0, len(e.payload)+1)
		for k := range e.payload {
			if !(k == "capability_uri" && e.uri != "") {
				keys = append(keys, k)
			}
		}
		if e.uri != "" {
			keys = append(keys, "capability_uri")
		}
		slices.Sort(keys) // byte order of UTF-8 = code point order
	} else if e.uri != "" {
		keys = uriPayloadKeys
	}
	d.rawString("{")
	for i, k := range keys {
		if i > 0 {
			d.sep(", ", ",")
		}
		d.str(k)
		d.sep(": ", ":")
		if k == "capability_uri" && e.uri != "" {
			d.str(e.uri)
			continue
		}
		if err := d.value(e.payload[k]); err != nil {
			return fmt.Errorf("boundary: evidence payload %q: %w", k, err)
		}
	}
	d.rawString("}")
	return nil
}

var uriPayloadKeys = []string{"capability_uri"}

// appendStableValue appends the chp-stable-v1 form of a payload value.
func appendStableValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return canonical.AppendChpStableString(dst, x), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case nil:
		return append(dst, "null"...), nil
	}
	cv, err := canonical.FromGo(v)
	if err != nil {
		return dst, err
	}
	return canonical.ChpStableV1.AppendCanonical(dst, cv)
}

func appendRawOrNull(dst, raw []byte) []byte {
	if raw == nil {
		return append(dst, "null"...)
	}
	return append(dst, raw...)
}

// memberJSON encodes a denial or error member as it is stored, and its
// canonical form (as chp.AttributionDigest renders it) computed from exactly
// those bytes.
func memberJSON(v any) ([]byte, []byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, nil, err
	}
	raw = buf.Bytes()
	cv, err := canonical.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	c, err := canonical.PythonSortKeys.AppendCanonical(nil, cv)
	return raw, c, err
}

// appendResult appends res as JSON with the members encoding/json writes
// (the result is recorded for idempotent replay; reading it back with
// encoding/json gives the same InvocationResult). The correlation is the
// invocation's stored form, rendered once by header.
func appendResult(dst []byte, res *chp.InvocationResult, corr []byte) ([]byte, error) {
	dst = append(dst, `{"capability_id":`...)
	dst = canonical.AppendChpStableString(dst, res.CapabilityID)
	dst = append(dst, `,"capability_version":`...)
	dst = appendNullableString(dst, res.CapabilityVersion)
	dst = append(dst, `,"completed_at":`...)
	dst = canonical.AppendChpStableString(dst, res.CompletedAt)
	dst = append(dst, `,"correlation":`...)
	dst = append(dst, corr...)
	dst = append(dst, `,"data":`...)
	if res.Data == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, res.Data...)
	}
	for _, m := range [...]struct {
		key string
		v   any
		nil bool
	}{{`,"denial":`, res.Denial, res.Denial == nil}, {`,"error":`, res.Error, res.Error == nil}} {
		dst = append(dst, m.key...)
		if m.nil {
			dst = append(dst, "null"...)
			continue
		}
		b, err := json.Marshal(m.v)
		if err != nil {
			return dst, err
		}
		dst = append(dst, b...)
	}
	if res.EvidenceIDs == nil {
		dst = append(dst, `,"evidence_ids":null`...)
	} else {
		dst = append(dst, `,"evidence_ids":[`...)
		for i, id := range res.EvidenceIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = canonical.AppendChpStableString(dst, id)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"invocation_id":`...)
	dst = canonical.AppendChpStableString(dst, res.InvocationID)
	dst = append(dst, `,"outcome":`...)
	dst = canonical.AppendChpStableString(dst, string(res.Outcome))
	if res.Replayed {
		dst = append(dst, `,"replayed":true`...)
	}
	dst = append(dst, `,"started_at":`...)
	dst = appendNullableString(dst, res.StartedAt)
	dst = append(dst, `,"success":`...)
	dst = strconv.AppendBool(dst, res.Success)
	return append(dst, '}'), nil
}

// appendNullableString appends *s as a chp-stable-v1 string, or null.
func appendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return canonical.AppendChpStableString(dst, *s)
}
