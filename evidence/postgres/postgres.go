// Package postgres is an evidence.Store on PostgreSQL (github.com/jackc/pgx/v5)
// that many hosts on many machines can write to at once: the same contract
// as evidence/logstore — append-only, hash-chained per correlation, durable
// before the answer — with the database, not the host, enforcing the
// chains.
//
// Data flow: Append takes sequences from a block the store reserved in
// the database (the next block is reserved ahead, off the store's lock),
// seals the records without the lock, chaining each to its
// correlation's head (cached, or read from the (corr, prev_seq) index, or
// none for a chain the caller says is new; an append of a correlation
// whose head is still being sealed waits for it), and queues them in
// memory, visible to Replay and Count at once.
// Sync(seq) makes them durable with group commit: the first caller becomes
// the leader and inserts everything queued by anyone so far in one
// statement (one round trip, one transaction), committed with
// synchronous_commit on, so the commit returns after the write-ahead log
// is flushed; later callers wait for that commit or the next. A commit
// writes one row per correlation — all the records it carries of that
// correlation, compressed together (hex runs packed, then S2 with a
// built-in dictionary, codec.go: an invocation's events share most of
// their bytes) with the
// results recorded for its invocations (PutResult finds the queued block
// whose last record names the invocation id), and one row per result no
// such block carries. Each caller of Sync encodes its own row before it
// waits, while the commit before it is in flight, so a commit mostly
// finds its rows ready.
//
// Schema (created on first Open, in the DSN's search_path):
//
//	evidence_blocks(corr, prev_seq, last_seq, body, res_at)
//	  -- records (prev_seq, last_seq], and results when res_at (the newest
//	  -- of them) is set; index (res_at) where set
//	  UNIQUE (corr, prev_seq)  -- no two blocks extend one block (0: none);
//	                           -- the replay, export and head index
//	  CHECK (0 <= prev_seq < last_seq)
//	  trigger: a block's predecessor is a block of its correlation
//	           ending at prev_seq
//	evidence_result_log(at, body) -- index (at); the invocation id is in the body
//	evidence_meta(next_seq)       -- sequences reserved so far
//
// So every correlation is one linked list of blocks with disjoint,
// ascending sequence ranges whatever the writers do — no (correlation,
// sequence) can be stored twice: a writer that extends a stale head
// collides on the no-fork constraint and its commit fails; its callers'
// Syncs return the error, never a false promise. Recorded results are a
// log too: every PutResult is a new row or rides in a new row, none is
// ever overwritten (the newest of an invocation id wins when they are
// read back). Triggers
// refuse UPDATE, DELETE and TRUNCATE of both; a deployment should also
// give hosts a role with only SELECT and INSERT (docs/operations.md).
//
// Sequences are globally unique: each store reserves blocks of Options.Block
// sequences from evidence_meta and gives back the unused tail of its last
// block on Close, when no one reserved after it, so a single writer's
// sequences have no gaps across a clean restart. Across writers, and after
// a crash, the global sequence has gaps; every correlation's records still
// ascend.
package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
CREATE TABLE IF NOT EXISTS evidence_blocks (
	corr      text   NOT NULL,
	prev_seq  bigint NOT NULL,
	last_seq  bigint NOT NULL,
	body      bytea  NOT NULL,
	res_at    timestamptz,
	CONSTRAINT evidence_blocks_no_fork UNIQUE (corr, prev_seq),
	CONSTRAINT evidence_blocks_order CHECK (prev_seq >= 0 AND prev_seq < last_seq)
);
ALTER TABLE evidence_blocks ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE evidence_blocks ADD COLUMN IF NOT EXISTS res_at timestamptz;
CREATE INDEX IF NOT EXISTS evidence_blocks_res_at ON evidence_blocks (res_at) WHERE res_at IS NOT NULL;
CREATE OR REPLACE FUNCTION evidence_append_only() RETURNS trigger LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'evidence is append-only'; END$$;
CREATE OR REPLACE FUNCTION evidence_blocks_chain() RETURNS trigger LANGUAGE plpgsql AS
	$$BEGIN
	IF NEW.prev_seq <> 0 AND NOT EXISTS (SELECT 1 FROM evidence_blocks
		WHERE corr = NEW.corr AND prev_seq < NEW.prev_seq AND last_seq = NEW.prev_seq) THEN
		RAISE EXCEPTION 'evidence_blocks_chain: no block of % ends at %', NEW.corr, NEW.prev_seq
			USING ERRCODE = 'foreign_key_violation';
	END IF;
	RETURN NEW;
	END$$;
` + chainTrigger + `;
CREATE OR REPLACE TRIGGER evidence_blocks_no_change BEFORE UPDATE OR DELETE ON evidence_blocks
	FOR EACH ROW EXECUTE FUNCTION evidence_append_only();
CREATE OR REPLACE TRIGGER evidence_blocks_no_truncate BEFORE TRUNCATE ON evidence_blocks
	FOR EACH STATEMENT EXECUTE FUNCTION evidence_append_only();
CREATE TABLE IF NOT EXISTS evidence_result_log (
	at   timestamptz NOT NULL,
	body bytea NOT NULL
);
ALTER TABLE evidence_result_log ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE INDEX IF NOT EXISTS evidence_result_log_at ON evidence_result_log (at);
CREATE OR REPLACE TRIGGER evidence_result_log_no_change BEFORE UPDATE OR DELETE ON evidence_result_log
	FOR EACH ROW EXECUTE FUNCTION evidence_append_only();
CREATE OR REPLACE TRIGGER evidence_result_log_no_truncate BEFORE TRUNCATE ON evidence_result_log
	FOR EACH STATEMENT EXECUTE FUNCTION evidence_append_only();
CREATE TABLE IF NOT EXISTS evidence_meta (
	one      boolean PRIMARY KEY DEFAULT true CHECK (one),
	next_seq bigint NOT NULL
);
INSERT INTO evidence_meta (next_seq) VALUES (0) ON CONFLICT DO NOTHING;
`

// chainTrigger checks each block's predecessor; rows with prev_seq 0
// start a chain and have none to check. Open moves a trigger created
// without the WHEN clause to this definition (see ensureSchema).
const chainTrigger = `CREATE OR REPLACE TRIGGER evidence_blocks_chain BEFORE INSERT ON evidence_blocks
	FOR EACH ROW WHEN (NEW.prev_seq <> 0) EXECUTE FUNCTION evidence_blocks_chain()`

// insertSQL writes one commit: the results and the blocks, in one
// statement and so one transaction. Results are only ever inserted.
const insertSQL = `
WITH r AS (
	INSERT INTO evidence_result_log (at, body)
	SELECT * FROM unnest($5::timestamptz[], $6::bytea[])
)
INSERT INTO evidence_blocks (corr, prev_seq, last_seq, body, res_at)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[], $7::timestamptz[])`

// retrySQL writes the results that failed commits held, after a commit's
// insertSQL and apart from it, so that a result the database refuses
// fails no block.
const retrySQL = `INSERT INTO evidence_result_log (at, body) SELECT * FROM unnest($1::timestamptz[], $2::bytea[])`

// maxResultTries is how many failed commits a result may be in before
// the store gives it up, once resultPatience has passed since the first:
// a failed commit queues its results again (see requeueResults).
const maxResultTries = 4

// resultPatience is how long after its first failed commit a result is
// kept for retries at least: its putter may call Sync that late after
// PutResult (a loaded machine's scheduling delay, milliseconds), while
// commits failing at once (an outage) can fail it maxResultTries times
// faster than that. It bounds the results kept during an outage to those
// put in its last resultPatience.
const resultPatience = time.Second

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
	// patience is resultPatience (tests shorten or lengthen it).
	patience time.Duration

	cm sync.RWMutex // held for writing while a commit moves records from the queue to the table

	lk      sync.Mutex // guards the head lookups waiting
	lkQueue []*lookupReq
	lkBusy  bool // a caller is leading the lookups

	mu       sync.Mutex // guards everything below
	closed   bool
	seq      uint64   // the highest sequence queued, or found at Open
	sealing  []uint64 // the first sequence of each batch placed and being sealed
	next, hi uint64   // the reserved block: next free sequence .. hi (none when next > hi)
	// spareLo..spareHi is a block reserved ahead (spareHi 0: none), by
	// the reservation in flight (reserving) when there is one.
	spareLo, spareHi uint64
	reserving        *reservation
	reservations     sync.WaitGroup // reservations in flight, for Close
	pos              uint64         // items queued since Open
	queue            []item         // queued, not yet committed, in order
	heads            map[string]head
	gen              uint64 // bumped whenever cached heads are dropped
	// resolved: items up to this position are committed or failed.
	// Written under mu, after the failure of a failed commit is recorded
	// (nfail first), so that a waiter that loads it without mu and finds
	// nfail 0 knows that nothing it waited for failed.
	resolved atomic.Uint64
	nfail    atomic.Uint64 // commits that failed since Open
	taken    uint64        // items up to this position are being committed (or resolved)
	syncing  bool          // a leader is committing
	done     chan struct{}
	failures []failure // the latest failed commits
}

// item is one queued block or result.
type item struct {
	pos uint64
	blk *block
	res *result
	// group is the first sequence of the Append that queued blk: the
	// blocks of one Append are consecutive in the queue and share it.
	group uint64
}

// block is the records one Append adds to one correlation, and the
// results that ride with them.
type block struct {
	recs    []evidence.Record // in sequence order, chained
	prevSeq uint64            // the record before the first (0: none)
	results []evidence.Result // recorded after the records, their data copied
	// pre is the body of the row this block starts, encoded by a caller
	// of Sync ahead of the commit (see precompress).
	pre atomic.Pointer[encoded]
}

// encoded is a row's body encoded ahead of its commit: it serves the
// commit's row starting at the same block when that row still holds
// exactly recs records and results results (blocks never lose records,
// and a row's blocks follow from its first: each extends the one
// before).
type encoded struct {
	recs, results int
	body          []byte
	err           error
}

// result is one queued result that no queued block carries; its data is
// copied.
type result struct {
	r evidence.Result
	// tries is how many failed commits held it, the first at since. A
	// result with tries > 0 is written by retrySQL.
	tries int
	since time.Time
	// body is r encoded by the first retry, kept for the next ones (r.Data
	// is dropped then): an outage retries a second's worth of results
	// with every commit.
	body []byte
}

// head is a correlation's newest record as this store knows it; pos is the
// queue position that wrote it (0: read from the database).
type head struct {
	hash string
	seq  uint64
	pos  uint64
	// sealing is set while an Append seals the records that will be the
	// head (hash is not known yet), and closed when it is done: an Append
	// of the same correlation waits for it.
	sealing chan struct{}
	// lost is set on a head being sealed when a commit that failed held
	// the records it chains to: its Append then queues nothing and fails
	// with it.
	lost error
}

// ErrLost is the error of an Append whose batch follows a record of the
// caller (evidence.Pending.After) that a failed commit lost: the caller's
// chain of records is broken, and nothing of the batch is appended.
var ErrLost = errors.New("evidence postgres: an earlier record of this caller was lost in a failed commit")

// failure is a commit that failed: the sequences of its records, and of
// the queued blocks chained to them, which failed with it; and, when
// results were lost with it, the queue positions of its items.
type failure struct {
	// recs are the runs of its records' sequences and of the chained
	// blocks', first and last of each, ascending and disjoint. Not one
	// span from its lowest to its highest: a batch sealed off the lock
	// may hold sequences in between and be queued after the commit took
	// the queue, and it is not lost.
	recs        [][2]uint64
	results     bool   // it held results
	first, last uint64 // its items' positions, chained blocks included
	err         error
}

// failed reports whether a Sync of record seq that waited for the items
// after position from up to target must return f's error: the record
// failed with f, or a result put before the Sync may have.
func (f *failure) failed(seq, from, target uint64) bool {
	return f.holds(seq) || f.results && f.first <= target && f.last > from
}

// holds reports whether record seq failed with f.
func (f *failure) holds(seq uint64) bool {
	i, _ := slices.BinarySearchFunc(f.recs, seq, func(r [2]uint64, seq uint64) int {
		return cmp.Compare(r[1], seq) // the first run ending at or after seq
	})
	return i < len(f.recs) && f.recs[i][0] <= seq
}

// runs sorts the sequence ranges and merges those that touch.
func runs(rs [][2]uint64) [][2]uint64 {
	slices.SortFunc(rs, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1][1]+1 >= r[0] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return slices.Clip(out)
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
	s := &Store{pool: pool, opts: o, log: o.Logger, patience: resultPatience, heads: map[string]head{}, done: make(chan struct{}), next: 1}
	if err := s.ensureSchema(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("evidence postgres: schema: %w", err)
	}
	// The sequences reserved so far: after a crash, or with other
	// writers, some of them were never used.
	var last int64
	if err := pool.QueryRow(ctx, `SELECT next_seq FROM evidence_meta`).Scan(&last); err != nil {
		pool.Close()
		return nil, fmt.Errorf("evidence postgres: %w", err)
	}
	s.seq = uint64(last)
	return s, nil
}

// ensureSchema creates the tables when one is missing, so that a host
// whose role may only read and insert can open an existing schema. In a
// schema whose chain trigger predates its WHEN clause it replaces the
// trigger when the role may; when it may not, the schema works as it did
// (the function checks prev_seq itself) and a warning says so.
func (s *Store) ensureSchema(ctx context.Context) error {
	const present = `SELECT to_regclass('evidence_blocks') IS NOT NULL AND to_regclass('evidence_result_log') IS NOT NULL
		AND to_regclass('evidence_meta') IS NOT NULL AND to_regclass('evidence_blocks_res_at') IS NOT NULL,
		to_regclass('evidence_events') IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass('evidence_blocks')
			AND tgname = 'evidence_blocks_chain' AND tgqual IS NULL)`
	var ok, old, stale bool
	if err := s.pool.QueryRow(ctx, present).Scan(&ok, &old, &stale); err != nil {
		return err
	}
	if ok && stale {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, chainTrigger)
			return err
		})
		if err != nil {
			s.log.Warn("evidence postgres: the chain trigger predates its WHEN clause and stays as it is "+
				"(same checks, more server CPU per row); open once as the schema's owner to replace it", "err", err)
		}
	}
	if ok {
		return nil
	}
	if old {
		return errors.New("the schema holds evidence_events, the uncompressed layout of an earlier capmesh: " +
			"open a new schema (search_path) for this version")
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
// used up. A correlation whose pendings all carry evidence.Pending.NewChain
// and whose head is not cached starts a chain without reading: if the hint
// was wrong, the block collides on the no-fork constraint (the chain's
// first block has prev_seq 0) and its commit fails like any stale head's.
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
		missing, gen := s.missingHeads(batch), s.gen
		s.mu.Unlock()
		found, err := s.lookup(missing)
		if err != nil {
			return nil, fmt.Errorf("evidence postgres: append: %w", s.closedOr(err))
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
		pl, wait, res, err := s.place(batch, found)
		s.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("evidence postgres: append: %w", err)
		}
		if res != nil {
			wait = res.done
		}
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if res != nil && res.err != nil {
				return nil, fmt.Errorf("evidence postgres: append: %w", res.err)
			}
			continue
		}
		out, err := s.sealPlaced(batch, pl)
		if err != nil {
			return nil, fmt.Errorf("evidence postgres: append: %w", err)
		}
		return out, nil
	}
}

// errSealPanic fails, in queueSealed, a batch whose sealer panicked; the
// panic itself goes on to the caller of Append.
var errSealPanic = errors.New("a sealer panicked")

// sealPlaced seals the batch placed at pl and queues it. A sealer that
// panics (a caller's bug) must not leave its correlations marked as being
// sealed, or every later Append of them would wait for ever: the
// placement is undone before the panic goes on.
func (s *Store) sealPlaced(batch []evidence.Pending, pl *placement) ([]evidence.Record, error) {
	sealed := false
	defer func() {
		if !sealed {
			s.mu.Lock()
			_ = s.queueSealed(pl, nil, errSealPanic)
			s.mu.Unlock()
		}
	}()
	out, blocks, err := seal(batch, pl)
	sealed = true
	s.mu.Lock()
	defer s.mu.Unlock()
	return out, s.queueSealed(pl, blocks, err)
}

// missingHeads is the batch's correlations whose heads are to be read
// from the database: not cached, and not hinted new (a chain no one
// has). Call with mu held.
func (s *Store) missingHeads(batch []evidence.Pending) []string {
	var missing []string
	var seen map[string]bool // large batches
	if len(batch) > 16 {
		seen = make(map[string]bool, len(batch))
	}
	for i := range batch {
		c := batch[i].CorrelationID
		if _, ok := s.heads[c]; ok || batch[i].NewChain {
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
	return missing
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
	found, err := s.readHeads(ctx, all)
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

// readHeads reads the committed heads of corrs: the last record of each one's
// last block.
func (s *Store) readHeads(ctx context.Context, corrs []string) (map[string]head, error) {
	rows, err := s.pool.Query(ctx, `SELECT c, b.prev_seq, b.last_seq, b.body FROM unnest($1::text[]) AS c
		CROSS JOIN LATERAL (SELECT prev_seq, last_seq, body FROM evidence_blocks WHERE corr = c ORDER BY prev_seq DESC LIMIT 1) AS b`, corrs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := map[string]head{}
	for rows.Next() {
		var c string
		row, err := scanBlock(rows, &c)
		if err != nil {
			return nil, err
		}
		recs, err := decodeBlock(c, row)
		if err != nil {
			return nil, err
		}
		found[c] = head{hash: recs[len(recs)-1].ContentHash, seq: row.last}
	}
	return found, rows.Err()
}

// scanBlock scans prev_seq, last_seq and body, after the columns in pre.
func scanBlock(rows pgx.Rows, pre ...any) (blockRow, error) {
	var row blockRow
	var prev, last int64
	if err := rows.Scan(append(pre, &prev, &last, &row.body)...); err != nil {
		return row, err
	}
	row.prev, row.last = uint64(prev), uint64(last)
	return row, nil
}

// placement is where place put a batch: its sequences from first, and
// the head each of its correlations extends.
type placement struct {
	first, n uint64
	corrs    []string       // the batch's correlations, in order
	heads    []head         // the head each extends
	index    map[string]int // positions in corrs, for batches of many
	done     chan struct{}  // closed by queueSealed: the batch's heads are known
	// The first correlation's, so that a batch of one correlation (the
	// boundary's) places it without allocating.
	corr0 [1]string
	head0 [1]head
}

// at is the position of correlation c in pl.corrs, or -1.
func (pl *placement) at(c string) int {
	if pl.index != nil {
		if i, ok := pl.index[c]; ok {
			return i
		}
		return -1
	}
	return slices.Index(pl.corrs, c)
}

// add appends correlation c, extending h, to pl.
func (pl *placement) add(c string, h head) {
	pl.corrs, pl.heads = append(pl.corrs, c), append(pl.heads, h)
	switch {
	case pl.index != nil:
		pl.index[c] = len(pl.corrs) - 1
	case len(pl.corrs) > 8: // searching would cost the square of the batch
		pl.index = make(map[string]int, 2*len(pl.corrs))
		for i, c := range pl.corrs {
			pl.index[c] = i
		}
	}
}

// place takes the batch's sequences and marks its correlations' heads as
// being sealed, so that the records can be sealed without mu (a
// correlation's next records wait for them, no one else does). When
// another Append is sealing the head of one of the batch's correlations,
// it returns what to wait for before trying again instead, and when the
// batch needs sequences not reserved yet, the reservation to wait for.
// It refuses a batch that follows (evidence.Pending.After) a record of
// the caller that a failed commit lost. Call with mu held.
func (s *Store) place(batch []evidence.Pending, found map[string]head) (*placement, chan struct{}, *reservation, error) {
	for i := range batch {
		if err := s.lostRecord(batch[i].After); err != nil {
			return nil, nil, nil, err
		}
	}
	pl := &placement{}
	pl.corrs, pl.heads = pl.corr0[:0], pl.head0[:0]
	// Every record must come after its correlation's head, which another
	// writer may have placed beyond this store's block.
	var floor uint64
	for i := range batch {
		c := batch[i].CorrelationID
		if pl.at(c) >= 0 {
			continue
		}
		h, ok := s.heads[c]
		if !ok {
			h = found[c]
		}
		if h.sealing != nil {
			return nil, h.sealing, nil, nil
		}
		pl.add(c, h)
		floor = max(floor, h.seq)
	}
	n := uint64(len(batch))
	if !s.haveSeqs(floor, n) {
		return nil, nil, s.reserve(floor, n), nil
	}
	pl.first, pl.n, pl.done = s.next, n, make(chan struct{})
	s.next += n
	if s.hi-s.next+1 < uint64(s.opts.Block)/2 && s.spareHi == 0 && s.reserving == nil {
		s.reserve(0, 0) // the next block, before this one runs out
	}
	for _, c := range pl.corrs {
		s.heads[c] = head{sealing: pl.done}
	}
	s.sealing = append(s.sealing, pl.first)
	return pl, nil, nil, nil
}

// lostRecord is the error of the failed commit that lost record seq, if
// one did (among the last maxFailures); nil for 0. Call with mu held.
func (s *Store) lostRecord(seq uint64) error {
	if seq == 0 || s.nfail.Load() == 0 {
		return nil
	}
	for i := range s.failures {
		if s.failures[i].holds(seq) {
			return fmt.Errorf("%w: record %d, which this batch follows, was lost: %w", ErrLost, seq, s.failures[i].err)
		}
	}
	return nil
}

// seal seals the batch at its placement, without the store's lock, into
// one block per correlation.
func seal(batch []evidence.Pending, pl *placement) ([]evidence.Record, []*block, error) {
	out := make([]evidence.Record, len(batch))
	blocks := make([]*block, len(pl.corrs)) // in the order of pl.corrs: of first records
	for i := range batch {
		p := &batch[i]
		k := pl.at(p.CorrelationID)
		b := blocks[k]
		var prev string
		if b != nil {
			prev = b.recs[len(b.recs)-1].ContentHash
		} else {
			b = &block{prevSeq: pl.heads[k].seq}
			blocks[k] = b
			prev = pl.heads[k].hash
		}
		seq := pl.first + uint64(i)
		hash, data, err := evidence.SealAppend(nil, p, seq, prev)
		if err != nil {
			return nil, nil, err
		}
		if err := evidence.CheckHash(i, hash); err != nil {
			return nil, nil, err
		}
		out[i] = evidence.Record{Sequence: seq, CorrelationID: p.CorrelationID, EventType: p.EventType, ContentHash: hash, PrevHash: prev, Data: data}
		b.recs = append(b.recs, out[i])
	}
	return out, blocks, nil
}

// queueSealed queues the blocks seal made of a batch placed at pl, and
// makes their last records the heads of their correlations; when sealing
// failed (err) or the store closed meanwhile, it queues nothing and puts
// back the heads the queue and the database hold. Either way the
// correlations are no longer being sealed. Call with mu held.
func (s *Store) queueSealed(pl *placement, blocks []*block, err error) error {
	defer close(pl.done)
	if i := slices.Index(s.sealing, pl.first); i >= 0 {
		s.sealing = slices.Delete(s.sealing, i, i+1)
	}
	if err == nil && s.closed {
		err = evidence.ErrClosed
	}
	for _, c := range pl.corrs {
		if h := s.heads[c]; err == nil && h.sealing == pl.done && h.lost != nil {
			err = h.lost // the records it chains to are not in the database
		}
	}
	if err != nil {
		if s.next == pl.first+pl.n {
			s.next = pl.first // no one placed after: no gap
		}
		for _, c := range pl.corrs {
			if h := s.queuedHead(c); h != nil {
				s.heads[c] = *h
			} else {
				// Committed, or none: read it again. A read begun before
				// that head committed may be older: make it retry.
				delete(s.heads, c)
				s.gen++
			}
		}
		return err
	}
	for _, b := range blocks {
		s.pos++
		s.queue = append(s.queue, item{pos: s.pos, blk: b, group: pl.first})
		last := b.recs[len(b.recs)-1]
		s.heads[last.CorrelationID] = head{hash: last.ContentHash, seq: last.Sequence, pos: s.pos}
	}
	s.seq = max(s.seq, pl.first+pl.n-1)
	if len(s.heads) > headCacheSize {
		s.pruneHeads()
	}
	return nil
}

// queuedHead is the head of correlation c among the queued blocks, if any
// is queued. Call with mu held.
func (s *Store) queuedHead(c string) *head {
	for i := len(s.queue) - 1; i >= 0; i-- {
		if b := s.queue[i].blk; b != nil && b.recs[0].CorrelationID == c {
			last := b.recs[len(b.recs)-1]
			return &head{hash: last.ContentHash, seq: last.Sequence, pos: s.queue[i].pos}
		}
	}
	return nil
}

// reservation is a block of sequences being reserved in the database.
type reservation struct {
	done chan struct{} // closed when it ended
	err  error         // why it failed, once done
}

// haveSeqs makes the current block hold n sequences above floor, taking
// the block reserved ahead when the current one cannot; it reports
// whether it could. Call with mu held.
func (s *Store) haveSeqs(floor, n uint64) bool {
	fits := func(lo, hi uint64) bool { return lo <= hi && hi-lo+1 >= n && lo > floor }
	if fits(s.next, s.hi) {
		return true
	}
	if s.spareHi != 0 && fits(s.spareLo, s.spareHi) {
		s.next, s.hi = s.spareLo, s.spareHi
		s.spareLo, s.spareHi = 0, 0
		return true
	}
	return false
}

// reserve starts reserving, without mu, a block of at least n sequences
// (and Options.Block) above floor, which becomes the block reserved
// ahead, unless a reservation is in flight; it returns the one in flight.
// No lock is held across the database's round trip: appends go on from
// the current block meanwhile, and those that need the new one wait for
// it. Call with mu held.
func (s *Store) reserve(floor, n uint64) *reservation {
	if s.reserving != nil {
		return s.reserving
	}
	r := &reservation{done: make(chan struct{})}
	s.reserving = r
	s.reservations.Add(1)
	go func() {
		defer s.reservations.Done()
		size := max(n, uint64(s.opts.Block))
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
		defer cancel()
		var end int64
		err := s.pool.QueryRow(ctx, `UPDATE evidence_meta SET next_seq = greatest(next_seq, $1) + $2 RETURNING next_seq`,
			int64(floor), int64(size)).Scan(&end)
		s.mu.Lock()
		if err != nil {
			r.err = fmt.Errorf("reserving sequences: %w", err)
		} else {
			s.spareLo, s.spareHi = uint64(end)-size+1, uint64(end)
		}
		s.reserving = nil
		s.mu.Unlock()
		close(r.done)
	}()
	return r
}

// pruneHeads drops cached heads whose records are committed; call with mu
// held.
func (s *Store) pruneHeads() {
	s.gen++
	for corr, h := range s.heads {
		if h.sealing == nil && h.pos <= s.resolved.Load() {
			delete(s.heads, corr)
		}
		if len(s.heads) <= headCacheSize/2 {
			return
		}
	}
}

// carryScan bounds how many queued items PutResult searches for the block
// of its invocation.
const carryScan = 256

// aheadBlocks bounds the queued blocks in a row that a caller of Sync
// encodes ahead: every caller whose record is in a row encodes all of it,
// so a row that grows by each caller (one correlation, many concurrent
// callers) would cost its callers the square of its blocks; a larger row
// is left to the commit, which encodes it once. A governed invocation's
// row is one or two blocks.
const aheadBlocks = 4

// PutResult implements evidence.ResultStore: the result is queued like an
// append and committed with the next Sync, as a new row or within a new
// row: a result is never overwritten, not even by another result for its
// invocation id. When a queued block that no commit has taken yet ends
// with a record naming the invocation id (its invocation's last event),
// that block carries the result: one row and one compression for both.
func (s *Store) PutResult(ctx context.Context, r evidence.Result) error {
	if r.InvocationID == "" {
		return fmt.Errorf("%w: result without invocation id", evidence.ErrInvalid)
	}
	if len(r.Data) > maxBody {
		return fmt.Errorf("evidence postgres: result: %w: %d bytes, over %d", evidence.ErrInvalid, len(r.Data), maxBody)
	}
	if y := r.At.UTC().Year(); y < 1 || y > 9999 {
		// The database refuses times past its range: the commits the
		// result is in would fail, other callers' blocks with them.
		return fmt.Errorf("evidence postgres: result: %w: time %v outside the years 1 to 9999", evidence.ErrInvalid, r.At)
	}
	r.Data = slices.Clone(r.Data) // the caller may reuse its buffer
	r.At = r.At.Truncate(time.Microsecond)
	id := []byte(r.InvocationID)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return evidence.ErrClosed
	}
	for i := len(s.queue) - 1; i >= max(0, len(s.queue)-carryScan); i-- {
		it := s.queue[i]
		if it.pos <= s.taken {
			break
		}
		if b := it.blk; b != nil && bytes.Contains(b.recs[len(b.recs)-1].Data, id) {
			b.results = append(b.results, r)
			s.mu.Unlock()
			return nil
		}
	}
	s.pos++
	s.queue = append(s.queue, item{pos: s.pos, res: &result{r: r}})
	s.mu.Unlock()
	return nil
}

// Sync implements evidence.Store with group commit: it returns once
// everything queued before the call is committed, or with the error of the
// commit that held record seq if that commit failed. A caller woken by the
// end of the commit it waited for returns without taking the store's lock
// (every caller of a commit wakes at once).
func (s *Store) Sync(ctx context.Context, seq uint64) error {
	s.precompress(seq)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return evidence.ErrClosed
	}
	from, target := s.resolved.Load(), s.pos
	locked, err := s.await(ctx, target)
	if locked {
		s.mu.Unlock()
	}
	if err != nil {
		return err
	}
	return s.failure(seq, from, target)
}

// syncLocked is Sync for Close: it waits until target is resolved,
// leading a commit when none runs, and reports the failure of record seq
// or of the items after from that held results; call with mu held.
func (s *Store) syncLocked(ctx context.Context, from, target, seq uint64) error {
	locked, err := s.await(ctx, target)
	if !locked {
		s.mu.Lock()
	}
	if err != nil {
		return err
	}
	return s.failureLocked(seq, from, target)
}

// await waits until target is resolved, leading a commit when none runs;
// call with mu held. It returns holding mu (locked), except when it was
// woken by the commit that resolved target (a caller that needs no more
// of the store then takes no lock: every caller of a commit wakes at
// once) or ctx ended.
func (s *Store) await(ctx context.Context, target uint64) (locked bool, err error) {
	for s.resolved.Load() < target {
		if !s.syncing {
			s.lead()
			continue
		}
		done := s.done
		s.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		if s.resolved.Load() >= target {
			return false, nil
		}
		s.mu.Lock()
	}
	return true, nil
}

// lead runs one commit as its leader and wakes its waiters; call with mu
// held and no commit running.
func (s *Store) lead() {
	s.syncing = true
	s.mu.Unlock()
	s.commit()
	s.mu.Lock()
	s.syncing = false
	close(s.done)
	s.done = make(chan struct{})
}

// failure is failureLocked, taking mu only when a commit has failed since
// Open.
func (s *Store) failure(seq, from, target uint64) error {
	if s.nfail.Load() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failureLocked(seq, from, target)
}

// failureLocked is the error of the failed commit that held record seq,
// or results among the items from..target a Sync waited for; nil when
// none did. Call with mu held.
func (s *Store) failureLocked(seq, from, target uint64) error {
	for i := range s.failures {
		if s.failures[i].failed(seq, from, target) {
			return s.failures[i].err
		}
	}
	return nil
}

// precompress encodes, on the calling goroutine, the row that the block
// holding record seq will be written in, unless a commit has taken it:
// the row of that block and the queued blocks of its correlation it
// extends, as columns will lay them out. A caller of Sync does this while
// the commit before its own is in flight, so the commit that takes the
// row finds it encoded: compression is off the path from one commit to
// the next, which otherwise waits for a whole batch's worth of it.
func (s *Store) precompress(seq uint64) {
	s.mu.Lock()
	first, row := s.rowOf(seq)
	s.mu.Unlock()
	if first == nil {
		return
	}
	e := &encoded{recs: len(row.recs), results: len(row.results)}
	e.body, e.err = encodeRow(row)
	first.pre.Store(e)
}

// rowOf returns the queued block, not yet taken by a commit, that starts
// the row holding record seq, and a copy of that row as columns will lay
// it out (the block and the queued blocks of its correlation that extend
// it, merged); nil when the row holds more than aheadBlocks blocks, or
// when the block of seq, or the row's first block, is not among the last
// carryScan queued: every Sync runs it under mu, so it looks at no more
// items than PutResult does, however long the queue grows while a commit
// is in flight. Call with mu held.
func (s *Store) rowOf(seq uint64) (*block, *block) {
	lo := max(0, len(s.queue)-carryScan)
	at := len(s.queue) - 1
	for ; ; at-- {
		if at < lo || s.queue[at].pos <= s.taken {
			return nil, nil
		}
		if b := s.queue[at].blk; b != nil && b.recs[0].Sequence <= seq && seq <= lastSeq(b) {
			break
		}
	}
	corr := s.queue[at].blk.recs[0].CorrelationID
	of := func(i int) *block {
		if b := s.queue[i].blk; b != nil && b.recs[0].CorrelationID == corr {
			return b
		}
		return nil
	}
	// Back to the row's first block. One with prev_seq 0 starts a chain:
	// no block ends at 0, so columns merges it into none.
	first := at
	for i := at - 1; s.queue[first].blk.prevSeq != 0; i-- {
		if i < 0 || s.queue[i].pos <= s.taken {
			break // the batch starts after i
		}
		if i < lo {
			return nil, nil // the row may start further back: the commit encodes it
		}
		if b := of(i); b != nil {
			if lastSeq(b) != s.queue[first].blk.prevSeq {
				break // columns starts a new row after b
			}
			first = i
		}
	}
	row := &block{prevSeq: s.queue[first].blk.prevSeq}
	for i, n := first, 0; i < len(s.queue); i++ {
		b := of(i)
		if b == nil {
			continue
		}
		if i != first && b.prevSeq != lastSeq(row) {
			break
		}
		if n++; n > aheadBlocks {
			return nil, nil // the commit encodes it once
		}
		// Clipped, so that merging copies and never writes into a
		// block's arrays.
		row.recs = append(slices.Clip(row.recs), b.recs...)
		row.results = append(slices.Clip(row.results), b.results...)
	}
	return s.queue[first].blk, row
}

// lastSeq is the sequence of b's last record.
func lastSeq(b *block) uint64 { return b.recs[len(b.recs)-1].Sequence }

// encodeRow is the body of the row b.
func encodeRow(b *block) ([]byte, error) {
	var at time.Time
	if len(b.results) > 0 {
		at = newest(b.results)
	}
	return encodeBlock(b.recs[0].PrevHash, b.prevSeq, b.recs, b.results, at)
}

// commit writes everything queued in one statement and resolves it:
// committed, or failed and dropped. Only the leader runs it.
func (s *Store) commit() {
	s.mu.Lock()
	batch := s.queue
	end := s.pos
	s.taken = end // no result may ride with what this commit writes
	s.mu.Unlock()
	if len(batch) == 0 {
		s.mu.Lock()
		if end > s.resolved.Load() {
			s.resolved.Store(end)
		}
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
	cols, retry, err := columns(batch)
	if err == nil && cols != nil {
		_, err = s.pool.Exec(ctx, insertSQL, cols...)
	}
	rerr := s.retryResults(ctx, retry)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.resolved.Store(end) // after the failure is recorded: see resolved
	s.queue = append(s.queue[:0:0], s.queue[len(batch):]...)
	if err != nil {
		s.failLocked(batch, err)
	}
	if rerr != nil {
		s.retryFailedLocked(retry, rerr, err != nil)
	}
}

// retryResults writes the results that failed commits held (retrySQL).
func (s *Store) retryResults(ctx context.Context, retry []item) error {
	if len(retry) == 0 {
		return nil
	}
	ats, bodies := make([]time.Time, len(retry)), make([][]byte, len(retry))
	for i, it := range retry {
		r := it.res
		if r.body == nil { // only the leader touches the results of its batch
			b, err := encodeResult(r.r.InvocationID, r.r.Data)
			if err != nil {
				return err
			}
			r.body = b
		}
		ats[i], bodies[i] = r.r.At, r.body
	}
	_, err := s.pool.Exec(ctx, retrySQL, ats, bodies)
	return err
}

// retryFailedLocked resolves the results that retrySQL failed to write:
// their Syncs get the error, and they are queued again. When the
// commit's main statement failed too (merge), its failure, which spans
// the whole batch, is marked as holding results instead of recording a
// second: a failed commit takes one of the maxFailures the store
// remembers, as an outage fails both statements of every commit. Call
// with mu held.
func (s *Store) retryFailedLocked(retry []item, err error, merge bool) {
	f := failure{results: true, first: retry[0].pos, last: retry[len(retry)-1].pos,
		err: fmt.Errorf("evidence postgres: commit of results: %w", err)}
	now := time.Now()
	var given []string
	for _, it := range retry {
		res := *it.res
		res.tries++
		if !s.requeueLocked(res, now) {
			given = append(given, it.res.r.InvocationID)
		}
	}
	if merge {
		s.failures[len(s.failures)-1].results = true
	} else {
		s.recordFailure(f)
	}
	s.log.Error("evidence postgres: commit of results failed", "results", len(retry), "err", err)
	s.logGivenUp(given)
}

// maxLoggedIDs is how many invocation ids one log line of results given
// up names.
const maxLoggedIDs = 8

// logGivenUp logs the results a failed commit gave up, in one line
// however many (an outage gives up every result put a second before):
// their number, and the invocation ids of the first maxLoggedIDs.
func (s *Store) logGivenUp(ids []string) {
	if len(ids) == 0 {
		return
	}
	s.log.Error("evidence postgres: results given up", "results", len(ids),
		"invocation_ids", ids[:min(len(ids), maxLoggedIDs)], "failed_commits_at_least", maxResultTries, "kept_at_least", s.patience)
}

// recordFailure adds f to the failures Syncs look up; call with mu held.
func (s *Store) recordFailure(f failure) {
	s.failures = append(s.failures, f)
	s.nfail.Add(1)
	if len(s.failures) > maxFailures {
		s.failures = slices.Delete(s.failures, 0, len(s.failures)-maxFailures)
	}
}

// failLocked resolves a batch whose commit failed; call with mu held.
// What the server kept is unknown to this store (a conflict, a lost
// connection): it fails the callers, and the queued Appends holding a
// block of the batch's correlations with them, whole (lostGroups) —
// they chain to the batch's blocks, so the database would refuse them,
// and with them the next commit and every block chained to them after.
// It forgets every cached head
// except those of records still queued, so that the next appends read
// the chains from the database, and queues the results again
// (requeueResults).
func (s *Store) failLocked(batch []item, err error) {
	f := failure{first: batch[0].pos, last: batch[len(batch)-1].pos,
		err: fmt.Errorf("evidence postgres: commit: %w", err)}
	broken := map[string]bool{}
	lo, hi := ^uint64(0), uint64(0)
	for _, it := range batch {
		if b := it.blk; b != nil {
			lo, hi = min(lo, b.recs[0].Sequence), max(hi, lastSeq(b))
			f.recs = append(f.recs, [2]uint64{b.recs[0].Sequence, lastSeq(b)})
			broken[b.recs[0].CorrelationID] = true
		}
		// A retried result is not the statement's (retrySQL writes it).
		f.results = f.results || it.res != nil && it.res.tries == 0 || it.blk != nil && len(it.blk.results) > 0
	}
	lost := s.lostGroups(broken)
	chained := 0
	var dropped []item
	s.queue = slices.DeleteFunc(s.queue, func(it item) bool {
		if b := it.blk; b != nil && lost[it.group] {
			dropped = append(dropped, it)
			f.recs = append(f.recs, [2]uint64{b.recs[0].Sequence, lastSeq(b)})
			f.results = f.results || len(b.results) > 0
			f.last = it.pos
			chained++
			return true
		}
		return false
	})
	f.recs = runs(f.recs)
	s.requeueResults(batch, dropped)
	s.recordFailure(f)
	s.dropHeads(broken, f.err)
	if hi == 0 { // no block: results only
		lo = 0
	}
	s.log.Error("evidence postgres: commit failed", "records", lo, "to", hi, "chained_blocks", chained, "err", err)
}

// requeueResults queues again the results that a failed commit of batch
// (insertSQL) and the blocks dropped with it held, alone, for retrySQL:
// a Sync whose caller put one before it, after the failure, must find it
// stored or fail (evidence.ResultStore), and the putter may call it after
// another caller's commit took the result and failed. The Syncs that
// waited for the failed commit get its error all the same. When that
// commit happened after all (its connection was lost after the server
// committed), the result is stored twice, as a store may hold an id
// twice. Results retrySQL writes are not the batch's: their own
// statement decides (retryFailedLocked). Call with mu held.
func (s *Store) requeueResults(batch, dropped []item) {
	now := time.Now()
	var given []string
	requeue := func(r evidence.Result) {
		if !s.requeueLocked(result{r: r, tries: 1, since: now}, now) {
			given = append(given, r.InvocationID)
		}
	}
	for _, it := range slices.Concat(batch, dropped) {
		switch {
		case it.res != nil && it.res.tries == 0:
			requeue(it.res.r)
		case it.blk != nil:
			for _, r := range it.blk.results {
				requeue(r)
			}
		}
	}
	s.logGivenUp(given)
}

// requeueLocked queues res for retrySQL after its res.tries-th failed
// commit, the first at res.since, and reports true; or gives it up
// (false: the caller logs it, logGivenUp) after maxResultTries once
// patience has passed since the first: a result the database keeps
// refusing fails only its own statements, and not for ever, and its
// putter's Sync, however late after PutResult within patience, finds it
// queued. Call with mu held.
func (s *Store) requeueLocked(res result, now time.Time) bool {
	if res.tries >= maxResultTries && now.Sub(res.since) >= s.patience {
		return false
	}
	if res.body != nil {
		res.r.Data = nil // encoded: the body is all retrySQL needs
	}
	s.pos++
	s.queue = append(s.queue, item{pos: s.pos, res: &res})
	return true
}

// lostGroups is the queued Appends (item.group) that a failed commit of
// the correlations in broken takes along, whole, as an Append is atomic:
// those with a block of a broken correlation (it chains to the commit's
// blocks, or to a block taken along); the correlations of their blocks
// break in turn (added to broken), so that a broken correlation keeps no
// queued block at all. A kept earlier block would start a row encoded
// ahead with a lost one (precompress), and a block chained to it later
// would make that row look unchanged to the commit. Call with mu held.
func (s *Store) lostGroups(broken map[string]bool) map[uint64]bool {
	lost := map[uint64]bool{}
	for changed := true; changed; {
		changed = false
		for _, it := range s.queue {
			if b := it.blk; b != nil && !lost[it.group] && broken[b.recs[0].CorrelationID] {
				lost[it.group], changed = true, true
			}
		}
		for _, it := range s.queue {
			if b := it.blk; b != nil && lost[it.group] {
				broken[b.recs[0].CorrelationID] = true
			}
		}
	}
	return lost
}

// dropHeads forgets the cached heads except those of records still
// queued and those being sealed, which the sealing Append sets when done
// (and which fail it, lost, when broken names their correlation); call
// with mu held.
func (s *Store) dropHeads(broken map[string]bool, lost error) {
	old := s.heads
	s.heads = map[string]head{}
	s.gen++
	for _, it := range s.queue {
		if b := it.blk; b != nil {
			last := b.recs[len(b.recs)-1]
			s.heads[last.CorrelationID] = head{hash: last.ContentHash, seq: last.Sequence, pos: it.pos}
		}
	}
	for c, h := range old {
		if h.sealing != nil { // newer than any queued block of c
			if broken[c] {
				h.lost = lost
			}
			s.heads[c] = h
		}
	}
}

// columns lays a batch out as insertSQL's parameters: one row per
// correlation (its blocks in the batch merged, as they are consecutive in
// its chain, with the results they carry) and one per result no block
// carries (cols nil: neither), and the results queued again after a
// failed commit (retry), which retrySQL writes. Rows encoded ahead by
// precompress are taken as they are; the rest are encoded here.
func columns(batch []item) (cols []any, retry []item, err error) {
	var (
		rows   []*block
		firsts []*block              // the queued block each row starts with
		open   = map[string]*block{} // the row of each correlation so far
		alone  []*result
	)
	for _, it := range batch {
		if r := it.res; r != nil && r.tries > 0 {
			retry = append(retry, it)
			continue
		} else if r != nil {
			alone = append(alone, r)
			continue
		}
		b := it.blk
		corr := b.recs[0].CorrelationID
		if m := open[corr]; m != nil && m.recs[len(m.recs)-1].Sequence == b.prevSeq {
			m.recs = append(m.recs, b.recs...)
			m.results = append(m.results, b.results...)
			continue
		}
		m := &block{recs: slices.Clip(b.recs), prevSeq: b.prevSeq, results: slices.Clip(b.results)}
		open[corr] = m
		rows, firsts = append(rows, m), append(firsts, b)
	}
	if len(rows) == 0 && len(alone) == 0 {
		return nil, retry, nil
	}
	bodies, results, err := compressAll(rows, firsts, alone)
	if err != nil {
		return nil, retry, err
	}
	corrs := make([]string, len(rows))
	lasts, prevs := make([]int64, len(rows)), make([]int64, len(rows))
	resAts := make([]pgtype.Timestamptz, len(rows))
	for i, b := range rows {
		corrs[i] = b.recs[0].CorrelationID
		lasts[i], prevs[i] = int64(b.recs[len(b.recs)-1].Sequence), int64(b.prevSeq)
		if len(b.results) > 0 {
			resAts[i] = pgtype.Timestamptz{Time: newest(b.results), Valid: true}
		}
	}
	ats := make([]time.Time, len(alone))
	for i, r := range alone {
		ats[i] = r.r.At
	}
	return []any{corrs, prevs, lasts, bodies, ats, results, resAts}, retry, nil
}

// newest is the latest time of results, at least one.
func newest(results []evidence.Result) time.Time {
	t := results[0].At
	for _, r := range results[1:] {
		if r.At.After(t) {
			t = r.At
		}
	}
	return t
}

// compressAll encodes the rows' bodies and the lone results', taking the
// body of a row encoded ahead (by precompress; firsts[i] is the queued
// block row i starts with) when it still holds what it was encoded from.
// What is left is encoded on the calling goroutine and, when there is
// much, on up to GOMAXPROCS-1 more: a commit waits for it, and a helper
// goroutine waits behind every caller's runnable work to be scheduled.
func compressAll(rows, firsts []*block, alone []*result) (bodies, results [][]byte, err error) {
	bodies, results = make([][]byte, len(rows)), make([][]byte, len(alone))
	var left []int // rows, then lone results (len(rows)+i)
	for i, b := range rows {
		if e := firsts[i].pre.Load(); e != nil && e.recs == len(b.recs) && e.results == len(b.results) {
			if e.err != nil {
				return nil, nil, e.err
			}
			bodies[i] = e.body
			continue
		}
		left = append(left, i)
	}
	for i := range alone {
		left = append(left, len(rows)+i)
	}
	errs := make([]error, len(left))
	encode := func(w, workers int) {
		for k := w; k < len(left); k += workers {
			if i := left[k]; i < len(rows) {
				bodies[i], errs[k] = encodeRow(rows[i])
			} else {
				r := alone[i-len(rows)].r
				results[i-len(rows)], errs[k] = encodeResult(r.InvocationID, r.Data)
			}
		}
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), len(left)/8))
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { encode(w, workers) })
	}
	encode(0, workers)
	wg.Wait()
	return bodies, results, errors.Join(errs...)
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
	var out []evidence.Record
	full := func() bool { return q.Limit > 0 && len(out) >= q.Limit }
	last := q.After
	err := s.blocks(ctx, q.CorrelationID, q.After, func(recs []evidence.Record) bool {
		for _, r := range recs {
			if r.Sequence > q.After && !full() {
				out = append(out, r)
				last = r.Sequence
			}
		}
		return !full()
	})
	if err != nil {
		return nil, fmt.Errorf("evidence postgres: replay: %w", s.closedOr(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eachQueued(q.CorrelationID, func(r *evidence.Record) {
		if r.Sequence > last && !full() {
			c := *r
			c.Data = slices.Clone(r.Data)
			out = append(out, c)
		}
	})
	return out, nil
}

// blocks calls fn with the records of each committed block of corr that
// ends after seq after, in order, until fn returns false.
func (s *Store) blocks(ctx context.Context, corr string, after uint64, fn func([]evidence.Record) bool) error {
	rows, err := s.pool.Query(ctx, `SELECT prev_seq, last_seq, body FROM evidence_blocks
		WHERE corr = $1 AND last_seq > $2 ORDER BY prev_seq`, corr, int64(after))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		row, err := scanBlock(rows)
		if err != nil {
			return err
		}
		recs, err := decodeBlock(corr, row)
		if err != nil {
			return err
		}
		if !fn(recs) {
			return nil
		}
	}
	return rows.Err()
}

// eachQueued calls fn for each queued record of corr, in order; call with
// mu held.
func (s *Store) eachQueued(corr string, fn func(*evidence.Record)) {
	for _, it := range s.queue {
		if b := it.blk; b != nil && b.recs[0].CorrelationID == corr {
			for i := range b.recs {
				fn(&b.recs[i])
			}
		}
	}
}

// closedOr is ErrClosed when the store is closed, else err: a call that
// raced Close finds the pool closed under it, and says so as every call
// after Close does.
func (s *Store) closedOr(err error) error {
	if s.isClosed() {
		return evidence.ErrClosed
	}
	return err
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Count implements evidence.Store: it reads the correlation's blocks.
func (s *Store) Count(ctx context.Context, correlationID, eventType string) (int, error) {
	s.cm.RLock()
	defer s.cm.RUnlock()
	if s.isClosed() {
		return 0, evidence.ErrClosed
	}
	n := 0
	count := func(r *evidence.Record) {
		if r.EventType == eventType {
			n++
		}
	}
	err := s.blocks(ctx, correlationID, 0, func(recs []evidence.Record) bool {
		for i := range recs {
			count(&recs[i])
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("evidence postgres: count: %w", s.closedOr(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eachQueued(correlationID, count)
	return n, nil
}

// Results implements evidence.ResultStore: newest first, queued results
// included (they are committed first). An invocation id recorded more than
// once is listed once per row.
func (s *Store) Results(ctx context.Context, since time.Time, fn func(evidence.Result) bool) error {
	if err := s.Sync(ctx, 0); err != nil {
		return err
	}
	// Lone results' rows and the rows of blocks carrying results, by the
	// newest result of each: a row's results are never newer than its key,
	// so those at or after the next row's key can be given out.
	rows, err := s.pool.Query(ctx, `SELECT at, body, '', 0, 0 FROM evidence_result_log WHERE at >= $1
		UNION ALL SELECT res_at, body, corr, prev_seq, last_seq FROM evidence_blocks WHERE res_at >= $1
		ORDER BY 1 DESC`, since)
	if err != nil {
		return fmt.Errorf("evidence postgres: results: %w", s.closedOr(err))
	}
	defer rows.Close()
	var pending []evidence.Result // newest first
	give := func(key time.Time) bool {
		for len(pending) > 0 && !pending[0].At.Before(key) {
			r := pending[0]
			pending = pending[1:]
			if !fn(r) {
				return false
			}
		}
		return true
	}
	for rows.Next() {
		got, key, err := scanResults(rows)
		if err != nil {
			return fmt.Errorf("evidence postgres: results: %w", err)
		}
		if !give(key) {
			return nil
		}
		for _, r := range got {
			if !r.At.Before(since) {
				pending = append(pending, r)
			}
		}
		slices.SortStableFunc(pending, func(a, b evidence.Result) int { return b.At.Compare(a.At) })
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("evidence postgres: results: %w", err)
	}
	give(time.Time{})
	return nil
}

// scanResults reads one row of Results' query: a lone result, or a block
// and the results it carries; key is the row's time.
func scanResults(rows pgx.Rows) ([]evidence.Result, time.Time, error) {
	var (
		corr       string
		key        time.Time
		row        blockRow
		prev, last int64
	)
	if err := rows.Scan(&key, &row.body, &corr, &prev, &last); err != nil {
		return nil, key, err
	}
	key = key.UTC()
	if corr == "" {
		id, data, err := decodeResult(row.body)
		if err != nil {
			return nil, key, fmt.Errorf("result recorded at %v: %w", key, err)
		}
		return []evidence.Result{{InvocationID: id, At: key, Data: data}}, key, nil
	}
	row.prev, row.last, row.resAt = uint64(prev), uint64(last), key
	_, results, err := decodeBody(corr, row)
	return results, key, err
}

// LastSequence implements evidence.Store: the highest sequence this store
// appended, or found when it opened — but below every record still being
// sealed: records are sealed off the lock, so a batch placed earlier may
// be queued after a later one, and no record may appear at or below a
// LastSequence already returned (an export's completeness is claimed as
// of it). Batches are placed in sequence order, each above s.seq.
func (s *Store) LastSequence() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.seq
	for _, first := range s.sealing {
		last = min(last, first-1)
	}
	return last
}

// Close commits what is queued, gives back the unused tail of the
// reserved block when no one reserved after it, and closes the pool.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	err := s.syncLocked(context.Background(), s.resolved.Load(), s.pos, s.seq)
	s.closed = true
	for s.syncing { // never close the pool under a commit in progress
		done := s.done
		s.mu.Unlock()
		<-done
		s.mu.Lock()
	}
	s.mu.Unlock()
	s.reservations.Wait()
	s.mu.Lock()
	from, end := s.unused()
	s.mu.Unlock()
	if from <= end {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
		_, gerr := s.pool.Exec(ctx, `UPDATE evidence_meta SET next_seq = $1 WHERE next_seq = $2`, int64(from-1), int64(end))
		cancel()
		if err == nil && gerr != nil {
			err = fmt.Errorf("evidence postgres: giving back sequences: %w", gerr)
		}
	}
	s.pool.Close()
	return err
}

// unused is the run of reserved sequences from..end that no record took
// and that ends with the last sequence this store reserved (from > end:
// none): the current block's tail, and the block reserved ahead when it
// follows the current one. Call with mu held.
func (s *Store) unused() (from, end uint64) {
	from, end = s.next, s.hi
	if s.spareHi != 0 {
		if s.next > s.hi || s.spareLo != s.hi+1 {
			from = s.spareLo
		}
		end = s.spareHi
	}
	return from, end
}

func init() {
	open := func(ctx context.Context, url string, log *slog.Logger) (evidence.Store, error) {
		return Open(ctx, url, &Options{Logger: log})
	}
	evidence.Register("postgres", open)
	evidence.Register("postgresql", open)
}
