package postgres

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/internal/hexpack"
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
//
// Format 3 is format 2's structure — records, refs, results — in which a
// block without results has m = 0, packed by hexpack (runs of lowercase
// hex digits, most of a CHP event's entropy, become bytes) and compressed
// as one S2 block with dictV3:
//
//	format byte 3 | CRC-32C (Castagnoli) of the raw body, little endian | S2 block
//
// A result body is format 1's raw result, packed and compressed the same
// way. S2 does no entropy coding, so it costs a fraction of zstd's time
// and reads back in a third of it; on packed bytes it stores about as few.
// The checksum makes any damaged body an error rather than other bytes: a
// result's data is not covered by the hash chain. Every body written is
// format 3; formats 1 and 2 are read back (rows written before it) and
// never written, so the zstd encoder is not in the write path.
const (
	formatV1 = 1
	formatV2 = 2
	formatV3 = 3
)

// dictV1 is the zstd dictionary of body formats 1 and 2, trained on the
// bodies and results of governed invocations (TestGenerateDict). Evidence
// compressed with it needs exactly these bytes to be read back: never
// change the file; a new dictionary is a new format byte.
//
//go:embed dict-v1.zdict
var dictV1 []byte

// dictV3Bytes is the S2 dictionary of body format 3 (s2.Dict.Bytes of
// packed CHP history and sample bodies, TestGenerateS2Dict). Like dictV1
// it is frozen: a new dictionary is a new format byte.
//
//go:embed dict-v3.s2dict
var dictV3Bytes []byte

// dictV3 is dictV3Bytes parsed; nil only if the embedded file is damaged,
// which TestDictsFrozen catches.
var dictV3 = s2.NewDict(dictV3Bytes)

// maxBody bounds a block's or a result's uncompressed bytes: larger
// appends are refused, and no row read back may decompress to more. It
// also bounds a format 3 body's packed bytes, so that reading one never
// allocates more whatever its header claims.
const maxBody = 256 << 20

// errCorrupt marks a block or result that does not decode.
var errCorrupt = errors.New("evidence postgres: corrupt body")

var decoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderDicts(dictV1),
		zstd.WithDecoderMaxMemory(maxBody), zstd.WithDecoderConcurrency(0))
})

// scratchPool holds the buffers of bodies being packed or compressed.
var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

// getScratch takes a buffer from scratchPool; putScratch gives it back
// unless it grew large (a rare large block's buffer is not kept).
func getScratch() *[]byte { return scratchPool.Get().(*[]byte) }

func putScratch(b *[]byte) {
	if cap(*b) <= 64<<10 {
		*b = (*b)[:0]
		scratchPool.Put(b)
	}
}

// compress appends a format 3 body of raw to dst: raw packed, then
// compressed with dictV3.
func compress(dst, raw []byte) ([]byte, error) { return compressUpTo(dst, raw, maxBody) }

// crc32c is the table of format 3's checksum.
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// compressUpTo is compress refusing raw bodies, and packed bodies, over
// limit bytes.
func compressUpTo(dst, raw []byte, limit int) ([]byte, error) {
	if len(raw) > limit {
		return nil, fmt.Errorf("%w: %d bytes in one block, over %d", evidence.ErrInvalid, len(raw), limit)
	}
	packed := getScratch()
	defer putScratch(packed)
	*packed = hexpack.Append((*packed)[:0], raw)
	if len(*packed) > limit { // only bytes 0x01 and 0x02, escaped, make it grow
		return nil, fmt.Errorf("%w: %d bytes in one block, %d packed, over %d", evidence.ErrInvalid, len(raw), len(*packed), limit)
	}
	enc := getScratch()
	defer putScratch(enc)
	if n := s2.MaxEncodedLen(len(*packed)); cap(*enc) < n {
		*enc = make([]byte, n)
	}
	*enc = dictV3.Encode((*enc)[:cap(*enc)], *packed)
	dst = slices.Grow(dst, 5+len(*enc))
	dst = binary.LittleEndian.AppendUint32(append(dst, formatV3), crc32.Checksum(raw, crc32c))
	return append(dst, *enc...), nil
}

// decompress undoes compress, and reads the zstd bodies of formats 1 and
// 2 written before format 3.
func decompress(body []byte) ([]byte, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: empty", errCorrupt)
	}
	switch body[0] {
	case formatV1, formatV2:
		dec, err := decoder()
		if err != nil {
			return nil, err
		}
		raw, err := dec.DecodeAll(body[1:], nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errCorrupt, err)
		}
		return raw, nil
	case formatV3:
		return decompressV3(body[1:], maxBody)
	}
	return nil, fmt.Errorf("%w: unknown format %d", errCorrupt, body[0])
}

// decompressV3 decodes a format 3 body after its format byte: no more
// than limit packed bytes, unpacked to no more than limit, and checked
// against its checksum.
func decompressV3(b []byte, limit int) ([]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: no checksum", errCorrupt)
	}
	sum, b := binary.LittleEndian.Uint32(b), b[4:]
	n, err := s2.DecodedLen(b)
	if err != nil || n > limit {
		return nil, fmt.Errorf("%w: S2 header (%d bytes packed)", errCorrupt, n)
	}
	packed := getScratch()
	defer putScratch(packed)
	if cap(*packed) < n {
		*packed = make([]byte, n)
	}
	p, err := dictV3.Decode((*packed)[:cap(*packed)], b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	*packed = p
	raw, err := hexpack.Unpack(make([]byte, 0, min(2*len(p), limit)), p, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	if crc32.Checksum(raw, crc32c) != sum {
		return nil, fmt.Errorf("%w: checksum", errCorrupt)
	}
	return raw, nil
}

// encodeBlock renders recs — consecutive records of one correlation, the
// first after prev — and the results they carry as a body; resAt is the
// newest result's time (the row's res_at).
func encodeBlock(prev string, prevSeq uint64, recs []evidence.Record, results []evidence.Result, resAt time.Time) ([]byte, error) {
	buf := getScratch()
	defer putScratch(buf)
	*buf = appendRawBlock((*buf)[:0], prev, prevSeq, recs, results, resAt)
	return compress(nil, *buf)
}

// rawBlock is a block's body before compression, in format 3's
// structure (format 2's, with m = 0 when results is empty).
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
	raw = binary.AppendUvarint(raw, uint64(len(results)))
	for i := range results {
		r := &results[i]
		raw = binary.AppendUvarint(raw, uint64(max(0, resAt.Sub(r.At).Microseconds())))
		raw = binary.AppendUvarint(raw, uint64(len(r.Data)))
		raw = appendRef(raw, r.Data, r.InvocationID)
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
	var buf [128]byte // the needle on the stack: hashes and ids are longer than a conversion's 32 bytes
	if i := bytes.Index(data, append(buf[:0], s...)); i >= 0 {
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
	if row.body[0] != formatV1 {
		if rmetas = d.resultMetas(row.body[0] == formatV3); d.err {
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

// resultMetas reads a format 2 or 3 body's result headers: at least one
// in format 2, none when zero is true.
func (r *reader) resultMetas(zero bool) []resMeta {
	m := r.uvarint()
	if r.err || (m == 0 && !zero) || m > uint64(len(r.b))/3 { // each result takes 3 bytes or more of the header
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
