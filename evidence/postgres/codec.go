package postgres

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/capmesh/capmesh/evidence"
)

// A body is one block's records, compressed: a format byte, then (format
// 1) a zstd frame (no checksum: Replay checks the structure, verifiers
// the hashes), compressed with dictV1, of
//
//	uvarint n
//	n × (uvarint seq-before, uvarint len(data), ref type, ref hash)
//	ref prev (within the first record's data)
//	n × data
//
// where a ref is a uvarint length and either uvarint 1+offset of those
// bytes within the record's data or 0 and the bytes themselves: a CHP
// event carries its own type and hashes, so they cost a few bytes, and the
// records' data follow each other for the compressor to match. prev is the
// content hash before the block's first record; each later record's
// previous hash is the one before it; seq-before is a record's sequence
// less the one before it (the block's prev_seq for the first). Records are
// stored byte for byte: the hashes are over the canonical bytes the store
// was given, decompression gives them back exactly, and Replay checks
// every block against the columns the database constrains (prev_seq and
// last_seq). A result body is the format byte and, compressed, a ref to
// the invocation id within the result, then the result.
//
// Format 2 is format 1 with the results the block carries (those of its
// invocations, recorded with them): after ref prev,
//
//	uvarint m
//	m × (uvarint µs-before, uvarint len(data), ref invocation id)
//
// and after the records' data, m × result data, where µs-before is how
// many microseconds the result was recorded before the row's res_at (the
// newest of them). One compression per block, and the results' evidence
// ids and names match the events' bytes.
const (
	formatV1 = 1
	formatV2 = 2
)

// dictV1 is the zstd dictionary of body format 1, trained on the bodies
// and results of governed invocations (TestGenerateDict). Evidence
// compressed with it needs exactly these bytes to be read back: never
// change the file; a new dictionary is a new format byte.
//
//go:embed dict-v1.zdict
var dictV1 []byte

// dictID names dictV1 in the zstd frames: one byte in each frame header.
const dictID = 1

// maxBody bounds a block's or a result's uncompressed bytes: larger
// appends are refused, and no row read back may decompress to more.
const maxBody = 256 << 20

// errCorrupt marks a block or result that does not decode.
var errCorrupt = errors.New("evidence postgres: corrupt body")

var (
	encoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderDict(dictV1),
			zstd.WithEncoderCRC(false), zstd.WithLowerEncoderMem(true))
	})
	decoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderDicts(dictV1),
			zstd.WithDecoderMaxMemory(maxBody), zstd.WithDecoderConcurrency(0))
	})
)

// compress appends the format byte and raw compressed to dst.
func compress(dst, raw []byte) ([]byte, error) { return compressAs(dst, formatV1, raw) }

// compressAs appends format and raw compressed to dst.
func compressAs(dst []byte, format byte, raw []byte) ([]byte, error) {
	if len(raw) > maxBody {
		return nil, fmt.Errorf("%w: %d bytes in one block, over %d", evidence.ErrInvalid, len(raw), maxBody)
	}
	enc, err := encoder()
	if err != nil {
		return nil, err
	}
	return enc.EncodeAll(raw, append(dst, format)), nil
}

// decompress undoes compress and compressAs.
func decompress(body []byte) ([]byte, error) {
	if len(body) == 0 || (body[0] != formatV1 && body[0] != formatV2) {
		return nil, fmt.Errorf("%w: unknown format", errCorrupt)
	}
	dec, err := decoder()
	if err != nil {
		return nil, err
	}
	raw, err := dec.DecodeAll(body[1:], nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return raw, nil
}

// encodeBlock renders recs — consecutive records of one correlation, the
// first after prev — and the results they carry as a body; resAt is the
// newest result's time (the row's res_at).
func encodeBlock(prev string, prevSeq uint64, recs []evidence.Record, results []evidence.Result, resAt time.Time) ([]byte, error) {
	buf := rawPool.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= 64<<10 { // a rare large block's buffer is not kept
			rawPool.Put(buf)
		}
	}()
	format := byte(formatV2)
	if len(results) == 0 {
		format, results = formatV1, nil
	}
	*buf = appendRawBlock((*buf)[:0], prev, prevSeq, recs, results, resAt)
	return compressAs(nil, format, *buf)
}

// rawPool holds the buffers of raw bodies being compressed.
var rawPool = sync.Pool{New: func() any { return new([]byte) }}

// rawBlock is a block's body before compression: format 1 when results
// is nil, else format 2.
func rawBlock(prev string, prevSeq uint64, recs []evidence.Record, results []evidence.Result, resAt time.Time) []byte {
	return appendRawBlock(nil, prev, prevSeq, recs, results, resAt)
}

// appendRawBlock appends rawBlock's bytes to raw.
func appendRawBlock(raw []byte, prev string, prevSeq uint64, recs []evidence.Record, results []evidence.Result, resAt time.Time) []byte {
	n := 16 + len(prev)
	for i := range recs {
		n += 32 + len(recs[i].Data)
	}
	for i := range results {
		n += 32 + len(results[i].Data)
	}
	raw = slices.Grow(raw, n)
	raw = binary.AppendUvarint(raw, uint64(len(recs)))
	for i := range recs {
		r := &recs[i]
		raw = binary.AppendUvarint(raw, r.Sequence-prevSeq)
		prevSeq = r.Sequence
		raw = binary.AppendUvarint(raw, uint64(len(r.Data)))
		raw = appendRef(raw, r.Data, r.EventType)
		raw = appendRef(raw, r.Data, r.ContentHash)
	}
	raw = appendRef(raw, recs[0].Data, prev)
	if results != nil {
		raw = binary.AppendUvarint(raw, uint64(len(results)))
		for i := range results {
			r := &results[i]
			raw = binary.AppendUvarint(raw, uint64(max(0, resAt.Sub(r.At).Microseconds())))
			raw = binary.AppendUvarint(raw, uint64(len(r.Data)))
			raw = appendRef(raw, r.Data, r.InvocationID)
		}
	}
	for i := range recs {
		raw = append(raw, recs[i].Data...)
	}
	for i := range results {
		raw = append(raw, results[i].Data...)
	}
	return raw
}

// appendRef appends s as a ref into data.
func appendRef(b, data []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	if s == "" {
		return b
	}
	if i := bytes.Index(data, []byte(s)); i >= 0 {
		return binary.AppendUvarint(b, uint64(i)+1)
	}
	return append(binary.AppendUvarint(b, 0), s...)
}

// blockRow is one evidence_blocks row as read.
type blockRow struct {
	prev, last uint64
	body       []byte
	resAt      time.Time // the newest result's time; zero when the row has none
}

// decodeBlock returns the records of a row of correlation corr, checking
// them against the row's columns: sequences ascending from above prev to
// last.
func decodeBlock(corr string, row blockRow) ([]evidence.Record, error) {
	recs, _, err := decodeBody(corr, row)
	return recs, err
}

// recMeta is a record's header in a body.
type recMeta struct {
	seq, size uint64
	typ, hash ref
}

// resMeta is a result's header in a body.
type resMeta struct {
	before, size uint64
	id           ref
}

// decodeBody returns the records of a row of correlation corr, as
// decodeBlock, and the results it carries.
func decodeBody(corr string, row blockRow) ([]evidence.Record, []evidence.Result, error) {
	raw, err := decompress(row.body)
	if err != nil {
		return nil, nil, err
	}
	bad := func(what string) error {
		return fmt.Errorf("%w: block (%d, %d] of %q: %s", errCorrupt, row.prev, row.last, corr, what)
	}
	d := reader{b: raw}
	n := d.uvarint()
	if d.err || n == 0 || n > uint64(len(raw))/4 { // each record takes 4 bytes or more of the header
		return nil, nil, bad("header")
	}
	var metas []recMeta // grown as read: n is believed once the header holds n records
	seq := row.prev
	for i := range n {
		metas = append(metas, recMeta{})
		m := &metas[i]
		delta := d.uvarint()
		seq += delta
		m.seq, m.size = seq, d.uvarint()
		m.typ, m.hash = d.ref(), d.ref()
		if d.err || delta == 0 || seq < delta || seq > row.last {
			return nil, nil, bad(fmt.Sprint("record ", i))
		}
	}
	prevRef := d.ref()
	var rmetas []resMeta
	if row.body[0] == formatV2 {
		if rmetas = d.resultMetas(); d.err {
			return nil, nil, bad("results")
		}
	}
	recs := make([]evidence.Record, n)
	for i, m := range metas {
		data := d.next(m.size)
		recs[i] = evidence.Record{Sequence: m.seq, CorrelationID: corr, Data: data}
		recs[i].EventType, recs[i].ContentHash = d.resolve(m.typ, data), d.resolve(m.hash, data)
	}
	prev := d.resolve(prevRef, recs[0].Data)
	results := make([]evidence.Result, len(rmetas))
	for i, m := range rmetas {
		data := d.next(m.size)
		results[i] = evidence.Result{InvocationID: d.resolve(m.id, data), At: row.resAt.Add(-time.Duration(m.before) * time.Microsecond), Data: data}
		if results[i].InvocationID == "" || m.before > math.MaxInt64/1000 {
			d.err = true
		}
	}
	if d.err || len(d.b) != 0 || recs[n-1].Sequence != row.last || (!row.resAt.IsZero() && len(results) == 0) {
		return nil, nil, bad("does not match its columns")
	}
	for i := range recs {
		recs[i].PrevHash = prev
		prev = recs[i].ContentHash
	}
	return recs, results, nil
}

// resultMetas reads a format 2 body's result headers: at least one.
func (r *reader) resultMetas() []resMeta {
	m := r.uvarint()
	if r.err || m == 0 || m > uint64(len(r.b))/3 { // each result takes 3 bytes or more of the header
		r.err = true
		return nil
	}
	var out []resMeta
	for range m {
		x := resMeta{before: r.uvarint(), size: r.uvarint(), id: r.ref()}
		if r.err {
			return nil
		}
		out = append(out, x)
	}
	return out
}

// reader reads a raw body; err is set once anything is out of bounds.
type reader struct {
	b   []byte
	err bool
}

func (r *reader) uvarint() uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[k:]
	return v
}

// next returns the next n bytes, aliasing the body.
func (r *reader) next(n uint64) []byte {
	if r.err || n > uint64(len(r.b)) {
		r.err = true
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

// ref is a string a body names: the bytes at off-1 of the record's data,
// or lit when off is 0.
type ref struct {
	n, off uint64
	lit    []byte
}

// ref reads a ref.
func (r *reader) ref() ref {
	x := ref{n: r.uvarint()}
	if x.n == 0 {
		return x
	}
	if x.off = r.uvarint(); x.off == 0 {
		x.lit = r.next(x.n)
	}
	return x
}

// resolve returns the string x names within data.
func (r *reader) resolve(x ref, data []byte) string {
	switch {
	case x.n == 0:
		return ""
	case x.off == 0:
		return string(x.lit)
	case x.off-1 > uint64(len(data)) || x.n > uint64(len(data))-(x.off-1):
		r.err = true
		return ""
	}
	return string(data[x.off-1 : x.off-1+x.n])
}

// encodeResult renders a result's body: the invocation id as a ref into
// its data, then the data.
func encodeResult(id string, data []byte) ([]byte, error) {
	raw := appendRef(make([]byte, 0, len(data)+8), data, id)
	return compress(nil, append(raw, data...))
}

// decodeResult undoes encodeResult.
func decodeResult(body []byte) (id string, data []byte, err error) {
	raw, err := decompress(body)
	if err != nil {
		return "", nil, err
	}
	d := reader{b: raw}
	x := d.ref()
	data = d.b
	if id = d.resolve(x, data); d.err || id == "" {
		return "", nil, fmt.Errorf("%w: result", errCorrupt)
	}
	return id, data, nil
}
