// Package postgres is an evidence.Store on PostgreSQL (github.com/jackc/pgx/v5)
// that many hosts on many machines can write to at once: the same contract
// as evidence/logstore — append-only, hash-chained per correlation, durable
// before the answer — with the database, not the host, enforcing the
// chains.
//
// Data flow: Append seals the records under the store lock at sequences
// taken from a block the store reserved in the database, chaining each to
// its correlation's head (cached, or read from the (corr, seq) index), and
// queues them in memory, visible to Replay and Count at once. Sync(seq)
// makes them durable with group commit: the first caller becomes the
// leader and inserts everything queued by anyone so far — records and
// recorded results — in one statement (one round trip, one transaction),
// committed with synchronous_commit on, so the commit returns after the
// write-ahead log is flushed; later callers wait for that commit or the
// next.
//
// Schema (created on first Open, in the DSN's search_path):
//
//	evidence_events(seq PK, corr, prev_seq, type, hash, prev, data)
//	  UNIQUE (corr, seq)                       -- replay and export index
//	  UNIQUE NULLS NOT DISTINCT (corr, prev_seq) -- no two records extend one record
//	  FOREIGN KEY (corr, prev_seq) → (corr, seq), CHECK (prev_seq < seq)
//	evidence_results(invocation_id PK, at, data)  -- index (at)
//	evidence_meta(next_seq)                       -- sequences reserved so far
//
// So every correlation is one linked list in increasing sequence order
// whatever the writers do: a writer that extends a stale head collides on
// the no-fork constraint and its commit fails; its callers' Syncs return
// the error, never a false promise. Triggers refuse UPDATE, DELETE and
// TRUNCATE of events; a deployment should also give hosts a role with
// only SELECT and INSERT (docs/operations.md).
//
// Sequences are globally unique: each store reserves blocks of Options.Block
// sequences from evidence_meta and gives back the unused tail of its last
// block on Close, when no one reserved after it, so a single writer's
// sequences have no gaps across a clean restart. Across writers, and after
// a crash, the global sequence has gaps; every correlation's records still
// ascend.
package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/capmesh/capmesh/evidence"
)

// headCacheSize bounds the cache of chain heads; a miss costs one indexed
// query.
const headCacheSize = 1 << 16

// maxFailures bounds the failed commits the store remembers for Sync.
const maxFailures = 1024

// schemaLock is the advisory lock key under which Open creates the schema,
// so that hosts starting together do not race on CREATE.
const schemaLock = 0x6361706d65736845 // "capmeshE"

const schema = `
CREATE TABLE IF NOT EXISTS evidence_events (
	seq      bigint PRIMARY KEY CHECK (seq > 0),
	corr     text   NOT NULL,
	prev_seq bigint,
	type     text   NOT NULL,
	hash     text   NOT NULL,
	prev     text   NOT NULL,
	data     bytea  NOT NULL,
	CONSTRAINT evidence_events_corr_seq UNIQUE (corr, seq),
	CONSTRAINT evidence_events_no_fork UNIQUE NULLS NOT DISTINCT (corr, prev_seq),
	CONSTRAINT evidence_events_chain FOREIGN KEY (corr, prev_seq) REFERENCES evidence_events (corr, seq),
	CONSTRAINT evidence_events_order CHECK (prev_seq < seq)
);
CREATE OR REPLACE FUNCTION evidence_append_only() RETURNS trigger LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evidence is append-only'; END$$;
CREATE OR REPLACE TRIGGER evidence_events_no_change BEFORE UPDATE OR DELETE ON evidence_events
	FOR EACH ROW EXECUTE FUNCTION evidence_append_only();
CREATE OR REPLACE TRIGGER evidence_events_no_truncate BEFORE TRUNCATE ON evidence_events
	FOR EACH STATEMENT EXECUTE FUNCTION evidence_append_only();
CREATE TABLE IF NOT EXISTS evidence_results (
	invocation_id text PRIMARY KEY,
	at   timestamptz NOT NULL,
	data bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS evidence_results_at ON evidence_results (at);
CREATE TABLE IF NOT EXISTS evidence_meta (
	one      boolean PRIMARY KEY DEFAULT true CHECK (one),
	next_seq bigint NOT NULL
);
INSERT INTO evidence_meta (next_seq) SELECT coalesce(max(seq), 0) FROM evidence_events ON CONFLICT DO NOTHING;
`

// insertSQL writes one commit: the results (the last of each invocation
// id) and the records, in one statement and so one transaction.
const insertSQL = `
WITH r AS (
	INSERT INTO evidence_results (invocation_id, at, data)
	SELECT * FROM unnest($7::text[], $8::timestamptz[], $9::bytea[])
	ON CONFLICT (invocation_id) DO UPDATE SET at = excluded.at, data = excluded.data
)
INSERT INTO evidence_events (seq, corr, prev_seq, type, hash, prev, data)
SELECT s, c, nullif(p, 0), t, h, v, d
FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $10::bytea[]) AS u(s, c, p, t, h, v, d)`

// Options configures Open. A nil *Options means defaults.
type Options struct {
	// Block is how many sequences the store reserves at a time (default
	// 1024): one round trip per block instead of one per append.
	Block int
	// MaxConns caps the connection pool (default 16).
	MaxConns int32
	// CommitTimeout bounds one group commit, so that an unreachable
	// server fails the waiting Syncs instead of hanging them (default
	// 60 s).
	CommitTimeout time.Duration
	// NoSync sets synchronous_commit off (benchmarks of the floor only;
	// never in production).
	NoSync bool
	// Logger receives failed commits. Default slog.Default().
	Logger *slog.Logger
}

// Store is an evidence.Store on PostgreSQL. It is safe for concurrent use,
// and any number of stores, in any number of processes, may share one
// database.
type Store struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger

	cm sync.RWMutex // held for writing while a commit moves records from the queue to the table

	lk      sync.Mutex // guards the head lookups waiting
	lkQueue []*lookupReq
	lkBusy  bool // a caller is leading the lookups

	mu       sync.Mutex // guards everything below
	closed   bool
	seq      uint64 // LastSequence
	next, hi uint64 // the reserved block: next free sequence .. hi (none when next > hi)
	pos      uint64 // items queued since Open
	queue    []item // queued, not yet committed, in order
	heads    map[string]head
	gen      uint64 // bumped whenever cached heads are dropped
	resolved uint64 // items up to this position are committed or failed
	syncing  bool   // a leader is committing
	done     chan struct{}
	failures []failure // the latest failed commits
}

// item is one queued record or result.
type item struct {
	pos     uint64
	rec     evidence.Record
	prevSeq uint64
	res     *evidence.Result
}

// head is a correlation's newest record as this store knows it; pos is the
// queue position that wrote it (0: read from the database).
type head struct {
	hash string
	seq  uint64
	pos  uint64
}

// failure is a commit that failed: the sequences of its records.
type failure struct {
	lo, hi uint64
	err    error
}

var (
	_ evidence.Store       = (*Store)(nil)
	_ evidence.ResultStore = (*Store)(nil)
)

// Open connects to the database dsn names (a postgres:// URL or key=value
// string), creating the schema if it is missing.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Block <= 0 {
		o.Block = 1024
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("evidence postgres: %w", err)
	}
	cfg.MaxConns = o.MaxConns
	// Durable before the answer whatever the server's default says.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	if o.NoSync {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("evidence postgres: %w", err)
	}
	s := &Store{pool: pool, opts: o, log: o.Logger, heads: map[string]head{}, done: make(chan struct{}), next: 1}
	if err := s.ensureSchema(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("evidence postgres: schema: %w", err)
	}
	var last int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM evidence_events`).Scan(&last); err != nil {
		pool.Close()
		return nil, fmt.Errorf("evidence postgres: %w", err)
	}
	s.seq = uint64(last)
	return s, nil
}

// ensureSchema creates the tables when one is missing, so that a host
// whose role may only read and insert can open an existing schema.
func (s *Store) ensureSchema(ctx context.Context) error {
	const present = `SELECT to_regclass('evidence_events') IS NOT NULL AND to_regclass('evidence_results') IS NOT NULL
		AND to_regclass('evidence_meta') IS NOT NULL`
	var ok bool
	if err := s.pool.QueryRow(ctx, present).Scan(&ok); err != nil || ok {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	})
}

// Name implements evidence.Store.
func (s *Store) Name() string { return "postgres" }

// Append implements evidence.Store. It reads the database only for a
// correlation whose head is not cached and when its block of sequences is
// used up.
func (s *Store) Append(ctx context.Context, batch ...evidence.Pending) ([]evidence.Record, error) {
	if err := evidence.Validate(batch); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, evidence.ErrClosed
		}
		var missing []string
		var seen map[string]bool // large batches
		if len(batch) > 16 {
			seen = make(map[string]bool, len(batch))
		}
		for i := range batch {
			c := batch[i].CorrelationID
			if _, ok := s.heads[c]; ok {
				continue
			}
			if seen != nil {
				if !seen[c] {
					seen[c] = true
					missing = append(missing, c)
				}
			} else if !slices.Contains(missing, c) {
				missing = append(missing, c)
			}
		}
		gen := s.gen
		s.mu.Unlock()
		found, err := s.lookup(missing)
		if err != nil {
			return nil, fmt.Errorf("evidence postgres: append: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, evidence.ErrClosed
		}
		if s.gen != gen { // heads dropped meanwhile: what was read may be stale
			s.mu.Unlock()
			continue
		}
		out, err := s.seal(ctx, batch, found)
		s.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("evidence postgres: append: %w", err)
		}
		return out, nil
	}
}

// lookupReq is one Append's request for the committed heads of its
// correlations: the lookups of concurrent appends share one query.
type lookupReq struct {
	corrs []string
	found map[string]head
	err   error
	done  chan struct{} // closed when answered
	turn  chan struct{} // closed when this request's caller is to lead
}

// lookup reads the committed heads of correlations. The first caller
// leads: it takes every request waiting, reads all their heads in one
// query and answers them; then it hands the lead to the oldest request
// that came meanwhile. No caller's context bounds a lookup (it serves
// several); the commit timeout does.
func (s *Store) lookup(corrs []string) (map[string]head, error) {
	if len(corrs) == 0 {
		return nil, nil
	}
	r := &lookupReq{corrs: corrs, done: make(chan struct{}), turn: make(chan struct{})}
	s.lk.Lock()
	s.lkQueue = append(s.lkQueue, r)
	lead := !s.lkBusy
	s.lkBusy = true
	s.lk.Unlock()
	if !lead {
		select {
		case <-r.done:
			return r.found, r.err
		case <-r.turn:
		}
	}
	s.lk.Lock()
	batch := s.lkQueue
	s.lkQueue = nil
	s.lk.Unlock()
	s.lookupBatch(batch)
	s.lk.Lock()
	if len(s.lkQueue) > 0 {
		close(s.lkQueue[0].turn)
	} else {
		s.lkBusy = false
	}
	s.lk.Unlock()
	return r.found, r.err
}

// lookupBatch answers the requests with one query.
func (s *Store) lookupBatch(batch []*lookupReq) {
	var all []string
	for _, r := range batch {
		all = append(all, r.corrs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	found := map[string]head{}
	rows, err := s.pool.Query(ctx, `SELECT c, e.seq, e.hash FROM unnest($1::text[]) AS c
		CROSS JOIN LATERAL (SELECT seq, hash FROM evidence_events WHERE corr = c ORDER BY seq DESC LIMIT 1) AS e`, all)
	if err == nil {
		for rows.Next() {
			var c string
			var h head
			var seq int64
			if err = rows.Scan(&c, &seq, &h.hash); err != nil {
				break
			}
			h.seq = uint64(seq)
			found[c] = h
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, r := range batch {
		r.err = err
		if err == nil {
			r.found = make(map[string]head, len(r.corrs))
			for _, c := range r.corrs {
				if h, ok := found[c]; ok {
					r.found[c] = h
				}
			}
		}
		close(r.done)
	}
}

// seal places and seals the batch and queues it; call with mu held.
func (s *Store) seal(ctx context.Context, batch []evidence.Pending, found map[string]head) ([]evidence.Record, error) {
	headOf := func(c string) head {
		if h, ok := s.heads[c]; ok {
			return h
		}
		return found[c]
	}
	// Every record must come after its correlation's head, which another
	// writer may have placed beyond this store's block.
	var floor uint64
	for i := range batch {
		floor = max(floor, headOf(batch[i].CorrelationID).seq)
	}
	n := uint64(len(batch))
	if s.next > s.hi || s.hi-s.next+1 < n || s.next <= floor {
		if err := s.reserve(ctx, floor, n); err != nil {
			return nil, err
		}
	}
	out := make([]evidence.Record, len(batch))
	prevSeqs := make([]uint64, len(batch))
	local := map[string]head{}
	for i := range batch {
		p := &batch[i]
		h, ok := local[p.CorrelationID]
		if !ok {
			h = headOf(p.CorrelationID)
		}
		seq := s.next + uint64(i)
		hash, data, err := evidence.SealAppend(nil, p, seq, h.hash)
		if err != nil {
			return nil, err
		}
		if err := evidence.CheckHash(i, hash); err != nil {
			return nil, err
		}
		local[p.CorrelationID] = head{hash: hash, seq: seq}
		prevSeqs[i] = h.seq
		out[i] = evidence.Record{Sequence: seq, CorrelationID: p.CorrelationID, EventType: p.EventType, ContentHash: hash, PrevHash: h.hash, Data: data}
	}
	for i, r := range out {
		s.pos++
		s.queue = append(s.queue, item{pos: s.pos, rec: r, prevSeq: prevSeqs[i]})
		s.heads[r.CorrelationID] = head{hash: r.ContentHash, seq: r.Sequence, pos: s.pos}
	}
	s.next += n
	s.seq = max(s.seq, s.next-1)
	if len(s.heads) > headCacheSize {
		s.pruneHeads()
	}
	return out, nil
}

// reserve takes a new block of at least n sequences, all above floor;
// call with mu held.
func (s *Store) reserve(ctx context.Context, floor, n uint64) error {
	size := max(n, uint64(s.opts.Block))
	var end int64
	err := s.pool.QueryRow(ctx, `UPDATE evidence_meta SET next_seq = greatest(next_seq, $1) + $2 RETURNING next_seq`,
		int64(floor), int64(size)).Scan(&end)
	if err != nil {
		return fmt.Errorf("reserving sequences: %w", err)
	}
	s.hi = uint64(end)
	s.next = s.hi - size + 1
	return nil
}

// pruneHeads drops cached heads whose records are committed; call with mu
// held.
func (s *Store) pruneHeads() {
	s.gen++
	for corr, h := range s.heads {
		if h.pos <= s.resolved {
			delete(s.heads, corr)
		}
		if len(s.heads) <= headCacheSize/2 {
			return
		}
	}
}

// PutResult implements evidence.ResultStore: the result is queued like an
// append and committed with the next Sync.
func (s *Store) PutResult(ctx context.Context, r evidence.Result) error {
	if r.InvocationID == "" {
		return fmt.Errorf("%w: result without invocation id", evidence.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return evidence.ErrClosed
	}
	s.pos++
	r.Data = slices.Clone(r.Data) // the caller may reuse its buffer
	s.queue = append(s.queue, item{pos: s.pos, res: &r})
	return nil
}

// Sync implements evidence.Store with group commit: it returns once
// everything queued before the call is committed, or with the error of the
// commit that held record seq if that commit failed.
func (s *Store) Sync(ctx context.Context, seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return evidence.ErrClosed
	}
	return s.syncLocked(ctx, s.pos, seq)
}

// syncLocked waits until target is resolved, leading a commit when none
// runs; call with mu held.
func (s *Store) syncLocked(ctx context.Context, target, seq uint64) error {
	for s.resolved < target {
		if !s.syncing {
			s.syncing = true
			s.mu.Unlock()
			s.commit()
			s.mu.Lock()
			s.syncing = false
			close(s.done)
			s.done = make(chan struct{})
			continue
		}
		done := s.done
		s.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			s.mu.Lock()
			return ctx.Err()
		}
		s.mu.Lock()
	}
	for _, f := range s.failures {
		if f.lo <= seq && seq <= f.hi {
			return f.err
		}
	}
	return nil
}

// commit writes everything queued in one statement and resolves it:
// committed, or failed and dropped. Only the leader runs it.
func (s *Store) commit() {
	s.mu.Lock()
	batch := s.queue
	end := s.pos
	s.mu.Unlock()
	if len(batch) == 0 {
		s.mu.Lock()
		s.resolved = max(s.resolved, end)
		s.mu.Unlock()
		return
	}
	end = batch[len(batch)-1].pos
	// A commit carries many callers' evidence: no one caller's context
	// may abandon it half way.
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	s.cm.Lock()
	defer s.cm.Unlock()
	_, err := s.pool.Exec(ctx, insertSQL, columns(batch)...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue[:0:0], s.queue[len(batch):]...)
	s.resolved = end
	if err == nil {
		return
	}
	// What the server kept is unknown to this store (a conflict, a lost
	// connection): fail the callers, and forget every cached head except
	// those of records still queued, so that the next appends read the
	// chains from the database.
	f := failure{lo: ^uint64(0), err: fmt.Errorf("evidence postgres: commit: %w", err)}
	for _, it := range batch {
		if it.res == nil {
			f.lo, f.hi = min(f.lo, it.rec.Sequence), max(f.hi, it.rec.Sequence)
		}
	}
	if f.hi == 0 {
		f.lo = 0 // results only: fail every Sync of this round
	}
	s.failures = append(s.failures, f)
	if len(s.failures) > maxFailures {
		s.failures = slices.Delete(s.failures, 0, len(s.failures)-maxFailures)
	}
	s.heads = map[string]head{}
	s.gen++
	for _, it := range s.queue {
		if it.res == nil {
			s.heads[it.rec.CorrelationID] = head{hash: it.rec.ContentHash, seq: it.rec.Sequence, pos: it.pos}
		}
	}
	s.log.Error("evidence postgres: commit failed", "records", f.lo, "to", f.hi, "err", err)
}

// columns lays a batch out as insertSQL's parameters.
func columns(batch []item) []any {
	var (
		seqs, prevSeqs           []int64
		corrs, types, hashes, ps []string
		datas                    [][]byte
		ids                      []string
		ats                      []time.Time
		results                  [][]byte
		last                     = map[string]int{}
	)
	for _, it := range batch {
		if r := it.res; r != nil {
			// One row per invocation id and statement: the last wins.
			if i, ok := last[r.InvocationID]; ok {
				ats[i], results[i] = r.At, r.Data
				continue
			}
			last[r.InvocationID] = len(ids)
			ids, ats, results = append(ids, r.InvocationID), append(ats, r.At), append(results, r.Data)
			continue
		}
		r := &it.rec
		seqs, prevSeqs = append(seqs, int64(r.Sequence)), append(prevSeqs, int64(it.prevSeq))
		corrs, types = append(corrs, r.CorrelationID), append(types, r.EventType)
		hashes, ps, datas = append(hashes, r.ContentHash), append(ps, r.PrevHash), append(datas, r.Data)
	}
	return []any{seqs, corrs, prevSeqs, types, hashes, ps, ids, ats, results, datas}
}

// Replay implements evidence.Store: committed records from the database,
// then queued ones.
func (s *Store) Replay(ctx context.Context, q evidence.Query) ([]evidence.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.cm.RLock()
	defer s.cm.RUnlock()
	if s.isClosed() {
		return nil, evidence.ErrClosed
	}
	var limit *int64
	if q.Limit > 0 {
		l := int64(q.Limit)
		limit = &l
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, type, hash, prev, data FROM evidence_events
		WHERE corr = $1 AND seq > $2 ORDER BY seq LIMIT $3`, q.CorrelationID, int64(q.After), limit)
	if err != nil {
		return nil, fmt.Errorf("evidence postgres: replay: %w", err)
	}
	var out []evidence.Record
	last := q.After
	for rows.Next() {
		r := evidence.Record{CorrelationID: q.CorrelationID}
		var seq int64
		if err := rows.Scan(&seq, &r.EventType, &r.ContentHash, &r.PrevHash, &r.Data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("evidence postgres: replay: %w", err)
		}
		r.Sequence = uint64(seq)
		last = r.Sequence
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence postgres: replay: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.queue {
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
		if it.res == nil && it.rec.CorrelationID == q.CorrelationID && it.rec.Sequence > last {
			r := it.rec
			r.Data = slices.Clone(r.Data)
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Count implements evidence.Store.
func (s *Store) Count(ctx context.Context, correlationID, eventType string) (int, error) {
	s.cm.RLock()
	defer s.cm.RUnlock()
	if s.isClosed() {
		return 0, evidence.ErrClosed
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM evidence_events WHERE corr = $1 AND type = $2`,
		correlationID, eventType).Scan(&n); err != nil {
		return 0, fmt.Errorf("evidence postgres: count: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.queue {
		if it.res == nil && it.rec.CorrelationID == correlationID && it.rec.EventType == eventType {
			n++
		}
	}
	return n, nil
}

// Results implements evidence.ResultStore: newest first, queued results
// included (they are committed first).
func (s *Store) Results(ctx context.Context, since time.Time, fn func(evidence.Result) bool) error {
	if err := s.Sync(ctx, 0); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `SELECT invocation_id, at, data FROM evidence_results WHERE at >= $1
		ORDER BY at DESC, invocation_id`, since)
	if err != nil {
		return fmt.Errorf("evidence postgres: results: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r evidence.Result
		if err := rows.Scan(&r.InvocationID, &r.At, &r.Data); err != nil {
			return fmt.Errorf("evidence postgres: results: %w", err)
		}
		r.At = r.At.UTC()
		if !fn(r) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("evidence postgres: results: %w", err)
	}
	return nil
}

// LastSequence implements evidence.Store: the highest sequence this store
// appended, or found when it opened.
func (s *Store) LastSequence() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// Close commits what is queued, gives back the unused tail of the
// reserved block when no one reserved after it, and closes the pool.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	err := s.syncLocked(context.Background(), s.pos, s.seq)
	s.closed = true
	for s.syncing { // never close the pool under a commit in progress
		done := s.done
		s.mu.Unlock()
		<-done
		s.mu.Lock()
	}
	next, hi := s.next, s.hi
	s.mu.Unlock()
	if next <= hi {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
		_, gerr := s.pool.Exec(ctx, `UPDATE evidence_meta SET next_seq = $1 WHERE next_seq = $2`, int64(next-1), int64(hi))
		cancel()
		if err == nil && gerr != nil {
			err = fmt.Errorf("evidence postgres: giving back sequences: %w", gerr)
		}
	}
	s.pool.Close()
	return err
}

func init() {
	open := func(ctx context.Context, url string, log *slog.Logger) (evidence.Store, error) {
		return Open(ctx, url, &Options{Logger: log})
	}
	evidence.Register("postgres", open)
	evidence.Register("postgresql", open)
}
