// Package evidence stores CHP execution evidence: an append-only log with one
// global, monotonic sequence and a hash chain per correlation.
//
// The Store interface is declared here, where the CHP boundary (package chp)
// consumes it. A store knows nothing about the CHP event format: the caller
// hands it Pending records whose Seal function renders the record once the
// store has picked its place — the global sequence and the content hash of
// the correlation's previous record — and returns the record's own content
// hash and bytes. The store keeps those bytes verbatim, so replay never
// re-encodes evidence.
//
// Data flow: chp.Boundary → Store.Append (sequence assigned, chained and
// written, not yet durable) → … → Store.Sync(last sequence) before the
// invocation's result is returned, so an answered invocation's evidence
// survives a crash. Many concurrent Syncs share one fsync (group commit).
// Replay reads one correlation's records in sequence order.
//
// There is no update or delete in the API: evidence is append-only.
// Implementations: NewMemory (tests, ephemeral hosts), evidence/logstore
// (the durable embedded default), evidence/sqlite and evidence/postgres
// (one database many hosts share; OpenURL opens it by URL); the durable
// ones also keep recorded results (ResultStore). evidence/storetest holds the
// conformance suite every implementation runs.
package evidence

import (
	"context"
	"errors"
	"time"
)

// Pending is one record to append.
type Pending struct {
	// CorrelationID names the chain the record extends. Required.
	CorrelationID string
	// EventType is indexed for Count. Required.
	EventType string
	// Seal renders the record at its place: seq is its global sequence and
	// prev the content hash of the correlation's previous record ("" for the
	// first). It returns the record's content hash and its encoded bytes. It
	// runs under the store's append lock: keep it short, never block.
	Seal func(seq uint64, prev string) (contentHash string, data []byte, err error)
	// Sealer is Seal appending the record's bytes to a buffer of the
	// store's (see Sealer), so that a store writes each record straight
	// into its own memory. A Pending needs Seal or Sealer; with both, they
	// must produce the same bytes. A store seals each Pending at most once.
	Sealer Sealer
	// NewChain is a hint: the caller drew CorrelationID itself, at random,
	// for this very call, so no record of it can exist anywhere. A store
	// whose chain heads live elsewhere (a shared database) may then skip
	// reading the correlation's head and start the chain — when it holds
	// nothing of the correlation itself. A store that trusts the hint must
	// still never fork a chain: if the hint is wrong, its own constraint
	// refuses the write and Sync returns that error. Stores that know
	// every head locally ignore it. Set it only on the first Append of the
	// chain: a later one's hint could meet a head the store has forgotten.
	NewChain bool
	// After is the sequence of the caller's own previous record of this
	// correlation, when it appended one before this batch without waiting
	// for it to be durable (0: none). A store that can lose a commit's
	// records and still take later appends of the correlation (a shared
	// database, where a commit fails on another writer's conflict or a
	// lost connection) refuses the append when that record was lost, so
	// that the Sync of the caller's last record never vouches for a chain
	// whose earlier records are gone. Stores for which a lost write is
	// the end of all writes ignore it.
	After uint64
}

// A Sealer renders one record at its place, appending its bytes to dst (as
// append does): seq is the record's global sequence and prev the content
// hash of the correlation's previous record ("" for the first). It returns
// the content hash and the extended slice; on error the slice must not be
// used. The hash may be the sealer's own memory, valid only until the next
// SealTo of the batch (or Append's return): a store copies what it keeps
// before sealing the next record. SealTo runs
// under the store's append lock: keep it short, never block. An interface
// rather than a func field, so that a caller's sealer — usually a pointer
// to state it has already prepared — needs no closure.
type Sealer interface {
	SealTo(dst []byte, seq uint64, prev string) (contentHash, out []byte, err error)
}

// SealerFunc adapts a function to Sealer.
type SealerFunc func(dst []byte, seq uint64, prev string) (contentHash, out []byte, err error)

// SealTo implements Sealer.
func (f SealerFunc) SealTo(dst []byte, seq uint64, prev string) ([]byte, []byte, error) {
	return f(dst, seq, prev)
}

// SealAppend seals p at seq after prev and appends its bytes to dst, with
// its Sealer when p has one.
func SealAppend(dst []byte, p *Pending, seq uint64, prev string) (contentHash string, out []byte, err error) {
	h, out, err := SealAppendHash(dst, p, seq, prev)
	return string(h), out, err
}

// SealAppendHash is SealAppend returning the content hash as bytes that
// may alias the sealer's memory, valid until the next record is sealed:
// for a store that copies the hash into its own buffer.
func SealAppendHash(dst []byte, p *Pending, seq uint64, prev string) (contentHash, out []byte, err error) {
	if p.Sealer != nil {
		return p.Sealer.SealTo(dst, seq, prev)
	}
	h, data, err := p.Seal(seq, prev)
	return []byte(h), append(dst, data...), err
}

// BatchChain finds, while a batch is sealed in order, the previous record of
// each correlation within the batch.
type BatchChain struct {
	corrs  []string
	hashes []string
	m      map[string]string // large batches
}

// Reset prepares c for a batch of n records.
func (c *BatchChain) Reset(n int) {
	c.corrs, c.hashes = c.corrs[:0], c.hashes[:0]
	c.m = nil
	if n > 16 {
		c.m = make(map[string]string, n)
	}
}

// Prev returns the content hash of the batch's last record of corr so far.
func (c *BatchChain) Prev(corr string) (string, bool) {
	if c.m != nil {
		h, ok := c.m[corr]
		return h, ok
	}
	for i := len(c.corrs) - 1; i >= 0; i-- {
		if c.corrs[i] == corr {
			return c.hashes[i], true
		}
	}
	return "", false
}

// Add records that the batch's latest record of corr has content hash h.
func (c *BatchChain) Add(corr, h string) {
	if c.m != nil {
		c.m[corr] = h
		return
	}
	c.corrs, c.hashes = append(c.corrs, corr), append(c.hashes, h)
}

// Record is one stored record.
type Record struct {
	Sequence      uint64
	CorrelationID string
	EventType     string
	ContentHash   string
	PrevHash      string
	Data          []byte
}

// Query selects records of one correlation in sequence order.
type Query struct {
	CorrelationID string
	// After is exclusive: only records with Sequence > After are returned.
	After uint64
	// Limit caps the number of records; 0 means no limit.
	Limit int
}

// Store is an append-only, hash-chained evidence log.
type Store interface {
	// Append seals and appends the batch atomically (all or none), in order,
	// each record taking the next global sequence. On return the records are
	// visible to Replay and Count but not necessarily durable: call Sync.
	// The returned records' Data may share memory the store reuses: it is
	// valid only until the next call on the store.
	Append(ctx context.Context, batch ...Pending) ([]Record, error)
	// Sync returns once every record with Sequence <= seq is durable (and,
	// for a ResultStore, every result put before the call).
	Sync(ctx context.Context, seq uint64) error
	// Replay returns the records of q.CorrelationID in sequence order.
	Replay(ctx context.Context, q Query) ([]Record, error)
	// Count returns how many records of eventType the correlation holds.
	Count(ctx context.Context, correlationID, eventType string) (int, error)
	// LastSequence is the highest sequence appended so far (0 when empty).
	LastSequence() uint64
	// Name says what engine this is, for the host descriptor ("memory", …).
	Name() string
	// Close releases the store; appends after Close fail with ErrClosed.
	Close() error
}

// SeqAppender is implemented by stores that can append a batch without
// returning its records: an invocation, which needs only the last
// sequence (for Sync), then appends its evidence without allocating.
type SeqAppender interface {
	// AppendSeq is Append returning only the sequence of the batch's last
	// record.
	AppendSeq(ctx context.Context, batch ...Pending) (last uint64, err error)
}

// AppendSeq appends batch to s and returns the sequence of its last
// record, through s's AppendSeq when it has one.
func AppendSeq(ctx context.Context, s Store, batch ...Pending) (uint64, error) {
	if a, ok := s.(SeqAppender); ok {
		return a.AppendSeq(ctx, batch...)
	}
	recs, err := s.Append(ctx, batch...)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	return recs[len(recs)-1].Sequence, nil
}

// Result is one recorded invocation result kept for idempotent replay
// (chp-v0.2.md §13): serving state stored beside the evidence, never part of
// a chain, never returned by Replay and never exported.
type Result struct {
	// InvocationID is the idempotency key.
	InvocationID string
	// At is when the result was recorded; the replay window counts from it.
	At time.Time
	// Data is the encoded result, opaque to the store.
	Data []byte
}

// ResultStore is implemented by durable stores that also keep recorded
// results, so that a retried invocation_id is not executed again after a
// restart. A result put before a Sync call is durable when that Sync
// returns: it shares the evidence's group commit.
type ResultStore interface {
	// PutResult records r. It copies what it keeps: the caller may reuse
	// r.Data once PutResult returns.
	PutResult(ctx context.Context, r Result) error
	// Results calls fn for each result recorded at or after since, newest
	// first, until fn returns false.
	Results(ctx context.Context, since time.Time, fn func(Result) bool) error
}

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("evidence: store closed")

// ErrInvalid is returned for a malformed Pending record.
var ErrInvalid = errors.New("evidence: invalid record")

// Correlation ids are at most MaxCorrelationID bytes, event types and
// content hashes at most MaxEventType bytes, in every store.
const (
	MaxCorrelationID = 0xffff
	MaxEventType     = 0xff
)

// Validate checks a batch before it is sealed.
func Validate(batch []Pending) error {
	for i, p := range batch {
		if p.CorrelationID == "" || p.EventType == "" || (p.Seal == nil && p.Sealer == nil) {
			return errors.Join(ErrInvalid, errors.New("record "+itoa(i)+": correlation id, event type and seal are required"))
		}
		if len(p.CorrelationID) > MaxCorrelationID || len(p.EventType) > MaxEventType {
			return errors.Join(ErrInvalid, errors.New("record "+itoa(i)+": correlation id or event type too long"))
		}
	}
	return nil
}

// SealBatch seals a batch at the sequences following last, chaining each
// record to the previous record of its correlation: an earlier record of the
// same batch, else head(correlation) — the stored head, "" for a new chain.
// It is the common core of every store's Append; on error nothing of the
// batch may be kept.
func SealBatch(last uint64, batch []Pending, head func(correlationID string) string) ([]Record, error) {
	out := make([]Record, len(batch))
	var chain BatchChain
	chain.Reset(len(batch))
	for i := range batch {
		p := &batch[i]
		prev, found := chain.Prev(p.CorrelationID)
		if !found {
			prev = head(p.CorrelationID)
		}
		seq := last + uint64(i) + 1
		h, data, err := SealAppend(nil, p, seq, prev)
		if err != nil {
			return nil, err
		}
		if err := CheckHash(i, h); err != nil {
			return nil, err
		}
		chain.Add(p.CorrelationID, h)
		out[i] = Record{Sequence: seq, CorrelationID: p.CorrelationID, EventType: p.EventType, ContentHash: h, PrevHash: prev, Data: data}
	}
	return out, nil
}

// CheckHash checks the content hash a Seal returned for record i.
func CheckHash[H string | []byte](i int, h H) error {
	if len(h) > MaxEventType {
		return errors.Join(ErrInvalid, errors.New("record "+itoa(i)+": content hash too long"))
	}
	return nil
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}
