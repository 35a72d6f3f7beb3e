package boundary

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/internal/evjson"
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
// the subject, stored and canonical) are rendered once (header). The JSON
// writers themselves are package evjson's.

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

// header renders the invocation-wide parts of its events. It fails only for
// a subject or baggage that is not a JSON object (ParseEnvelope rejects
// those earlier; an envelope built in Go may carry anything).
func (b *Boundary) header(inv *invocation, env *chp.InvocationEnvelope, caller *Caller) (invHeader, error) {
	var h invHeader
	var si evjson.Subject
	var err error
	if caller != nil && caller.info != nil {
		si = *caller.info
	} else if si, err = b.subjects.Get(env.Subject); err != nil {
		return h, fmt.Errorf("%w: subject: %v", chp.ErrBadEnvelope, err)
	}
	h.subject, h.subjectC = si.Stored, si.Canon
	c := &env.Correlation
	if len(c.CorrelationID) > evidence.MaxCorrelationID {
		return h, fmt.Errorf("%w: correlation_id longer than %d bytes", chp.ErrBadEnvelope, evidence.MaxCorrelationID)
	}
	st := inv.stage()
	// The correlation, stored (d.k) and canonical (d.c, in st.scratch).
	d := evjson.Dual{K: st.hdr[:0], C: st.scratch[:0]}
	if err := d.Correlation(c); err != nil {
		return h, err
	}
	buf := d.K
	n := len(buf)
	buf = append(buf, d.C...)
	st.scratch = d.C[:0]
	m := len(buf)
	buf = canonical.AppendChpStableString(buf, c.CorrelationID)
	o := len(buf)
	buf = canonical.AppendChpStableString(buf, env.InvocationID)
	h.corr, h.corrC, h.corrID, h.invID = buf[:n:n], buf[n:m:m], buf[m:o:o], buf[o:]
	st.hdr = buf
	return h, nil
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
	pending := evidence.Pending{CorrelationID: inv.env.Correlation.CorrelationID, EventType: e.typ, Sealer: s, NewChain: inv.newChain}
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
		if f.denial, f.denialC, err = evjson.Member(e.denial); err != nil {
			return err
		}
	}
	if e.err != nil {
		f.err, f.errC, err = evjson.Member(e.err)
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
	buf = evjson.AppendNullableString(buf, inv.version)
	f.ver[1] = len(buf)
	buf = append(buf, `,"content_hash":"`...)
	s.head = int32(len(buf))
	// Up to the event id.
	buf = append(buf, `","correlation":`...)
	buf = append(buf, h.corr...)
	buf = append(buf, `,"denial":`...)
	buf = evjson.AppendRawOrNull(buf, f.denial)
	buf = append(buf, `,"error":`...)
	buf = evjson.AppendRawOrNull(buf, f.err)
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
	d := evjson.Dual{C: st.scratch[:0], K: buf}
	err := d.Payload(e.uri, e.payload)
	st.scratch = d.C[:0]
	if err != nil {
		return buf, err
	}
	buf = d.K
	sum := sha256.Sum256(d.C)
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
	buf = evjson.AppendRawOrNull(buf, f.denialC)
	buf = append(buf, `, "error": `...)
	buf = evjson.AppendRawOrNull(buf, f.errC)
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
