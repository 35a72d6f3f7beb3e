package logstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore/internal/format"
)

// Reading a log: the scanner walks the file record by record. Where a record
// does not verify it looks for the next one that does, byte by byte (a
// record header is recognisable: a plausible length, then a sequence in
// the range the damaged bytes could have held, then a matching CRC-32C),
// so that one damaged record never hides the records after it. Damage with
// nothing that verifies after it is a torn tail.

const (
	// scanChunk is how much the scanner reads at a time.
	scanChunk = 1 << 20
	// whyJump is the reason for a record that verifies but skips
	// sequences: damage of zero bytes (records removed whole).
	whyJump = "sequence jump"
	// whyZero is the reason for a zero header: the end of the log, unless
	// records follow.
	whyZero = "zeroed record header"
)

type itemKind uint8

const (
	kindRecord itemKind = iota
	kindResult
	kindGap
)

// frame is one frame of the file that verifies: a record, or a block of
// records (format version 2 or 3).
type frame struct {
	off, size int64  // in the file
	raw       []byte // the frame, header included, valid during the visit only
	block     bool
	rawLen    int64 // a block's raw length
	items     []item
}

// logical is the frame's length in the logical space (see segment).
func (f *frame) logical() int64 {
	if f.block {
		return f.rawLen
	}
	return f.size
}

// item is one record that verifies.
type item struct {
	kind itemKind
	loc  int64 // logical offset (see segment)
	size int64 // length of its version 1 encoding
	rec  evidence.Record
	at   int64  // result, gap: unix µs
	next uint64 // gap: the sequence of the next evidence record
	note string // gap
}

// Damage is one run of bytes in the log that holds no record that verifies,
// with records that verify after it.
type Damage struct {
	// Offset and Length place the damaged bytes in the log. Length 0 means
	// records are missing whole (the sequence jumps without damaged bytes).
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
	// Reason says why the record at Offset does not verify.
	Reason string `json:"reason"`
	// After is the last evidence sequence that verifies before the damage
	// (0: none); Next the first after it (0: only results follow).
	After uint64 `json:"after"`
	Next  uint64 `json:"next"`
	// Claims are what the damaged bytes' record headers say, unverified.
	Claims []Claim `json:"claims,omitempty"`
}

// Missing is the number of evidence sequences lost in d.
func (d Damage) Missing() uint64 { return max(d.Next, d.After+1) - d.After - 1 }

// Claim is what a damaged record's bytes say about it. None of it is
// verified: the record's checksum failed.
type Claim struct {
	Offset        int64  `json:"offset"`
	Sequence      uint64 `json:"sequence"`
	CorrelationID string `json:"correlation_id,omitempty"`
	EventType     string `json:"event_type,omitempty"`
}

// Tail is a torn tail: bytes after the last record that verifies, with no
// record that verifies after them — what a write cut short by a crash
// leaves.
type Tail struct {
	Offset int64 `json:"offset"`
	// Length counts the bytes up to the last non-zero one.
	Length int64  `json:"length"`
	Reason string `json:"reason"`
}

// scanResult is what a scan of the whole file found.
type scanResult struct {
	end     int64 // end of the last frame that verifies
	lend    int64 // logical end of the records that verify
	segs    []segment
	next    uint64 // the evidence sequence the next append takes
	damaged []Damage
	tail    *Tail
}

type scanner struct {
	r     io.ReaderAt
	total int64
	buf   []byte
	bufAt int64
}

// bytes returns the file's bytes [at, at+n); the slice is valid until the
// next call.
func (s *scanner) bytes(at int64, n int) ([]byte, error) {
	if at >= s.bufAt && at+int64(n) <= s.bufAt+int64(len(s.buf)) {
		return s.buf[at-s.bufAt : at-s.bufAt+int64(n)], nil
	}
	size := min(max(int64(n), scanChunk), s.total-at)
	if size < int64(n) {
		return nil, io.ErrUnexpectedEOF
	}
	if int64(cap(s.buf)) < size {
		s.buf = make([]byte, size)
	}
	s.buf = s.buf[:size]
	k, err := s.r.ReadAt(s.buf, at)
	if int64(k) < size {
		s.buf = s.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading at %d: %w", at, err)
	}
	s.bufAt = at
	return s.buf[:n], nil
}

// scanLog walks the log, calling visit for each frame that verifies, in
// file order.
func scanLog(r io.ReaderAt, total int64, visit func(*frame) error) (scanResult, error) {
	sc := &scanner{r: r, total: total}
	res := scanResult{next: 1}
	var off int64
	loose, maxSeq := false, uint64(0)
	unresolved := 0 // res.damaged[unresolved:] wait for their Next
	for off < total {
		fr, why, err := sc.parse(off, res.next, loose, maxSeq)
		if err != nil {
			return res, err
		}
		switch why {
		case "":
			for i := range fr.items {
				switch it := &fr.items[i]; it.kind {
				case kindRecord:
					for i := unresolved; i < len(res.damaged); i++ {
						res.damaged[i].Next = it.rec.Sequence
					}
					unresolved = len(res.damaged)
					res.next, loose = it.rec.Sequence+1, false
				case kindGap:
					res.next = it.next
				}
				fr.items[i].loc += res.lend
			}
			if fr.block {
				res.segs = append(res.segs, segment{l: res.lend, p: off, n: fr.rawLen, frame: fr.size})
			} else {
				res.segs = addRun(res.segs, res.lend, off, fr.size)
			}
			res.lend += fr.logical()
			if visit != nil {
				if err := visit(&fr); err != nil {
					return res, err
				}
			}
			off += fr.size
			res.end = off
			continue
		case whyJump:
			res.damaged = append(res.damaged, Damage{Offset: off, Reason: fmt.Sprintf("sequence jumps past %d", res.next), After: res.next - 1})
			loose, maxSeq = true, math.MaxUint64
			continue
		}
		at, bound, err := sc.resync(off, res.next)
		if err != nil {
			return res, err
		}
		if at < 0 {
			res.tail, err = sc.tail(off, why)
			return res, err
		}
		res.damaged = append(res.damaged, Damage{Offset: off, Length: at - off, Reason: why, After: res.next - 1})
		loose, maxSeq = true, bound
		off = at
	}
	return res, nil
}

// resync finds the first frame that verifies after the damaged one at bad
// (-1: none) and the highest sequence its first record may have. It first
// searches for the sequences the damaged bytes could have been followed by
// (one per format.MinRecord bytes). But the bytes may have held a gap record (any
// jump) or a block of more records than their length bounds, and sequences
// only grow: any record before what that finds has a sequence below the
// first one claimed from there on, and with nothing found, any sequence
// (records past the damage are damage to report, never a tail to cut).
func (s *scanner) resync(bad int64, next uint64) (int64, uint64, error) {
	at, err := s.search(bad, s.total, next, func(at int64) uint64 { return next + uint64((at-bad)/format.MinRecord) })
	claimed, end := uint64(format.MaxSequence+1), s.total
	if err == nil && at >= 0 {
		claimed, err = s.claimed(at, next)
		end = at
	}
	if err != nil || claimed <= next+1 {
		return at, claimed, err
	}
	if before, err := s.search(bad, end, next, func(int64) uint64 { return claimed - 1 }); err != nil || before >= 0 {
		return before, claimed - 1, err
	}
	return at, claimed, nil
}

// claimed is the first sequence that the frames verifying from at on
// claim (a record's, a gap record's next); format.MaxSequence+1 if none does.
func (s *scanner) claimed(at int64, next uint64) (uint64, error) {
	for at < s.total {
		fr, why, err := s.parse(at, next, true, format.MaxSequence)
		if err != nil || why != "" {
			return format.MaxSequence + 1, err
		}
		for _, it := range fr.items {
			if it.kind != kindResult {
				return max(it.rec.Sequence, it.next), nil // the other is 0
			}
		}
		at += fr.size
	}
	return format.MaxSequence + 1, nil
}

// parse reads the frame at off. It returns why it does not verify ("" if
// it does); an error only for a failed read. next is the evidence sequence
// expected; with loose (after damage) any sequence from next to maxSeq is
// accepted. Item locations are relative to the frame's logical start.
func (s *scanner) parse(off int64, next uint64, loose bool, maxSeq uint64) (frame, string, error) {
	fr := frame{off: off}
	if s.total-off < format.HeaderSize {
		return fr, "short header", nil
	}
	h, err := s.bytes(off, format.HeaderSize)
	if err != nil {
		return fr, "", err
	}
	if [format.HeaderSize]byte(h) == ([format.HeaderSize]byte{}) {
		return fr, whyZero, nil
	}
	n := int64(binary.BigEndian.Uint32(h))
	sum := binary.BigEndian.Uint32(h[4:])
	if n > format.MaxBody || n > s.total-off-format.HeaderSize {
		return fr, "short or oversized body", nil
	}
	raw, err := s.bytes(off, int(format.HeaderSize+n))
	if err != nil {
		return fr, "", err
	}
	body := raw[format.HeaderSize:]
	if format.Checksum(body) != sum {
		return fr, "checksum mismatch", nil
	}
	fr.raw, fr.size = raw, format.HeaderSize+n
	if format.IsBlock(body) {
		return parseBlock(fr, body, next, loose, maxSeq)
	}
	it, why := parseRecord(body, next, loose, maxSeq, true)
	if why != "" {
		return fr, why, nil
	}
	it.size = fr.size
	fr.items = []item{it}
	return fr, "", nil
}

// parseRecord decodes the record body b. first says whether it may be
// the first evidence record after damage or a block boundary (see parse);
// otherwise its sequence must be next.
func parseRecord(b []byte, next uint64, loose bool, maxSeq uint64, first bool) (item, string) {
	if format.IsSpecial(b) {
		return parseSpecial(b, next)
	}
	rec, err := format.DecodeRecord(b)
	if err != nil {
		return item{}, err.Error()
	}
	switch seq := rec.Sequence; {
	case seq > format.MaxSequence:
		return item{}, fmt.Sprintf("sequence %d out of range", seq)
	case seq == next, first && loose && seq > next && seq <= maxSeq:
	case first && seq > next && !loose:
		return item{}, whyJump
	default:
		return item{}, fmt.Sprintf("sequence %d where %d was expected", seq, next)
	}
	return item{kind: kindRecord, rec: rec}, ""
}

// parseSpecial decodes a result or gap record.
func parseSpecial(body []byte, next uint64) (item, string) {
	if len(body) > 8 && body[8] == format.GapKind {
		g, err := format.DecodeGap(body)
		if err != nil {
			return item{}, err.Error()
		}
		if g.Next < next {
			return item{}, fmt.Sprintf("gap to sequence %d where %d was expected", g.Next, next)
		}
		return item{kind: kindGap, next: g.Next, at: g.At, note: g.Note}, ""
	}
	r, err := format.DecodeResult(body)
	if err != nil {
		return item{}, err.Error()
	}
	return item{kind: kindResult, at: r.At.UnixMicro()}, ""
}

// parseBlock decodes the block body b of fr: every record in it must
// verify, its evidence sequences contiguous, the first one as a record of
// its own would be.
func parseBlock(fr frame, b []byte, next uint64, loose bool, maxSeq uint64) (frame, string, error) {
	raw, err := format.DecodeBlock(b)
	if err != nil {
		return fr, err.Error(), nil
	}
	fr.block, fr.rawLen = true, int64(len(raw))
	first, why := true, ""
	format.Records(raw, func(off int, rec []byte, w string) bool {
		if why = w; why != "" {
			return false
		}
		body := rec[format.HeaderSize:]
		if format.IsSpecial(body) && len(body) > 8 && body[8] != format.ResultKind {
			why = "a gap or block record inside a block"
			return false
		}
		it, w := parseRecord(body, next, loose, maxSeq, first)
		if why = w; why != "" {
			return false
		}
		if it.kind == kindRecord {
			first, next = false, it.rec.Sequence+1
		}
		it.loc, it.size = int64(off), int64(len(rec))
		fr.items = append(fr.items, it)
		return true
	})
	switch {
	case why == whyJump:
	case why != "":
		why = "block: " + why
	case len(fr.items) == 0:
		why = "empty block"
	}
	if why != "" {
		fr.items = nil
	}
	return fr, why, nil
}

var zeroBlock [256]byte

// search finds the first record that verifies after the one at bad and
// starts before end, or -1. A candidate must look like a record header
// before its checksum is computed: a length that fits, then a result or
// gap tag, or a sequence from next to bound of its offset.
func (s *scanner) search(bad, end int64, next uint64, bound func(at int64) uint64) (int64, error) {
	const look = format.HeaderSize + 9 // the bytes a candidate is judged on
	for p := bad + 1; p < end && s.total-p >= format.MinRecord; {
		b, err := s.bytes(p, int(min(scanChunk, s.total-p)))
		if err != nil {
			return -1, err
		}
		lim := min(len(b)-look, int(end-1-p))
		for i := 0; i <= lim; i++ {
			if b[i] > format.MaxBody>>24 {
				continue
			}
			if i+len(zeroBlock) <= len(b) && bytes.Equal(b[i:i+len(zeroBlock)], zeroBlock[:]) {
				i += len(zeroBlock) - 4 // no length field starts in a zero run
				continue
			}
			at := p + int64(i)
			if !candidate(b[i:i+look], s.total-at, next, bound(at)) {
				continue
			}
			_, why, err := s.parse(at, next, true, bound(at))
			if err != nil {
				return -1, err
			}
			if why == "" {
				return at, nil
			}
			if b, err = s.bytes(p, len(b)); err != nil { // parse moved the window
				return -1, err
			}
		}
		p += int64(lim + 1)
	}
	return -1, nil
}

// candidate judges the first bytes of a possible record at a position with
// room bytes left in the file.
func candidate(b []byte, room int64, next, maxSeq uint64) bool {
	n := int64(binary.BigEndian.Uint32(b))
	if n < format.MinEvidenceBody || n > format.MaxBody || n > room-format.HeaderSize {
		return false
	}
	seq := binary.BigEndian.Uint64(b[format.HeaderSize:])
	if seq == 0 {
		return b[format.HeaderSize+8] == format.ResultKind || b[format.HeaderSize+8] == format.GapKind || b[format.HeaderSize+8] == format.BlockKind
	}
	return seq >= next && seq <= min(maxSeq, format.MaxSequence)
}

// tail describes the bytes from off to the end of the file, which hold no
// record that verifies; nil if they are all zeros (space prepared ahead).
func (s *scanner) tail(off int64, why string) (*Tail, error) {
	end := s.total
	for end > off {
		from := max(off, end-scanChunk)
		b, err := s.bytes(from, int(end-from))
		if err != nil {
			return nil, err
		}
		if i := lastNonZero(b); i >= 0 {
			return &Tail{Offset: off, Length: from + int64(i) + 1 - off, Reason: why}, nil
		}
		end = from
	}
	return nil, nil
}

func lastNonZero(b []byte) int {
	for len(b) >= len(zeroBlock) && bytes.Equal(b[len(b)-len(zeroBlock):], zeroBlock[:]) {
		b = b[:len(b)-len(zeroBlock)]
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}
