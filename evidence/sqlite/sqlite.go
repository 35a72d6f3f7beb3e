// Package sqlite is an evidence.Store on SQLite (pure Go, modernc.org/sqlite):
// the relational alternative to evidence/logstore, measured against it
// (docs/BENCHMARKS.md) and usable wherever a host prefers one database file
// that standard tools can query.
//
// Data flow: Append seals the records under the store lock and queues them in
// memory — they are visible to Replay and Count at once. Sync(seq) makes them
// durable with group commit: the first caller becomes the writer and inserts
// everything queued by anyone so far in one transaction (WAL mode,
// synchronous=FULL, so COMMIT returns after the write-ahead log is fsynced);
// later callers wait for that commit or the next. So the durability contract
// is exactly the logstore's: an invocation is answered only after its
// evidence survives a crash.
//
// Schema (evidence.db, mode 0600 in a 0700 directory):
//
//	events(seq INTEGER PRIMARY KEY, corr, type, hash, prev, data)  -- index (corr, seq)
//	results(invocation_id PRIMARY KEY, at, data)                    -- index (at)
//
// Triggers refuse UPDATE and DELETE on events: the table is append-only even
// for someone holding the file. Recorded results (evidence.ResultStore) are
// serving state in their own table, committed with the evidence.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/internal/groupcommit"
)

// FileName is the database file inside the store directory.
const FileName = "evidence.db"

// headCacheSize bounds the in-memory cache of chain heads; a miss costs one
// indexed query.
const headCacheSize = 1 << 16

const schema = `
CREATE TABLE IF NOT EXISTS events (
	seq  INTEGER PRIMARY KEY,
	corr TEXT NOT NULL,
	type TEXT NOT NULL,
	hash TEXT NOT NULL,
	prev TEXT NOT NULL,
	data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS events_corr ON events (corr, seq);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
	BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
	BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;
CREATE TABLE IF NOT EXISTS results (
	invocation_id TEXT PRIMARY KEY,
	at   INTEGER NOT NULL,
	data BLOB NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS results_at ON results (at);
`

// Options configures Open. A nil *Options means defaults.
type Options struct {
	// NoSync sets synchronous=OFF (benchmarks of the floor only; never in
	// production).
	NoSync bool
}

// Store is an evidence.Store backed by SQLite. It is safe for concurrent
// use; one process at a time may open a store directory.
type Store struct {
	dir  string
	w    *sql.DB // the writer: one connection
	r    *sql.DB // readers
	lock *os.File

	mu      sync.Mutex // guards everything below
	closed  bool
	failed  error
	seq     uint64
	pos     uint64 // items (records and results) queued since open
	queue   []item // queued, not yet committed, in order
	heads   map[string]head
	written uint64 // highest sequence committed

	cm sync.RWMutex // held for writing while a commit becomes visible
	tx *sql.Tx      // the open transaction, between insert and commitTx (committer only)

	gc *groupcommit.Committer // positions committed
}

// item is one queued record or result.
type item struct {
	pos uint64
	rec evidence.Record
	res *evidence.Result
}

// head is a cached chain head; seq is the sequence of the record it names.
type head struct {
	hash string
	seq  uint64
}

var (
	_ evidence.Store       = (*Store)(nil)
	_ evidence.ResultStore = (*Store)(nil)
)

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("evidence sqlite: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("evidence sqlite: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("evidence sqlite: %w", err)
	}
	if err := lockFile(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("evidence sqlite: %s is in use by another process: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		f.Close()
	}
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("evidence sqlite: %w", err)
	}
	sync := "FULL"
	if opts.NoSync {
		sync = "OFF"
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")&_pragma=busy_timeout(10000)"
	s := &Store{dir: dir, lock: lock, heads: map[string]head{}}
	s.gc = groupcommit.New(0, s.commit, s.failure)
	fail := func(err error) (*Store, error) {
		s.closeDBs()
		lock.Close()
		return nil, fmt.Errorf("evidence sqlite %s: %w", path, err)
	}
	if s.w, err = sql.Open("sqlite", dsn); err != nil {
		return fail(err)
	}
	s.w.SetMaxOpenConns(1)
	if _, err := s.w.Exec(schema); err != nil {
		return fail(err)
	}
	if s.r, err = sql.Open("sqlite", dsn+"&mode=ro"); err != nil {
		return fail(err)
	}
	s.r.SetMaxOpenConns(4)
	var last sql.NullInt64
	if err := s.w.QueryRow(`SELECT max(seq) FROM events`).Scan(&last); err != nil {
		return fail(err)
	}
	s.seq = uint64(last.Int64)
	s.written = s.seq
	return s, nil
}

func (s *Store) closeDBs() {
	if s.r != nil {
		s.r.Close()
	}
	if s.w != nil {
		s.w.Close()
	}
}

// Name implements evidence.Store.
func (s *Store) Name() string { return "sqlite" }

func (s *Store) usable() error {
	if s.closed {
		return evidence.ErrClosed
	}
	return s.failed
}

// headOf returns the head of corr; call with mu held. A cache miss reads the
// committed head from the database (a correlation with queued records is
// always cached).
func (s *Store) headOf(ctx context.Context, corr string) (string, error) {
	if h, ok := s.heads[corr]; ok {
		return h.hash, nil
	}
	var hash string
	err := s.r.QueryRowContext(ctx, `SELECT hash FROM events WHERE corr = ? ORDER BY seq DESC LIMIT 1`, corr).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return hash, err
}

// Append implements evidence.Store: no I/O for a correlation whose head is
// cached.
func (s *Store) Append(ctx context.Context, batch ...evidence.Pending) ([]evidence.Record, error) {
	if err := evidence.Validate(batch); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	var lookupErr error
	out, err := evidence.SealBatch(s.seq, batch, func(corr string) string {
		h, err := s.headOf(ctx, corr)
		if err != nil && lookupErr == nil {
			lookupErr = err
		}
		return h
	})
	if err == nil {
		err = lookupErr
	}
	if err != nil {
		return nil, fmt.Errorf("evidence sqlite: append: %w", err)
	}
	for _, r := range out {
		s.pos++
		s.queue = append(s.queue, item{pos: s.pos, rec: r})
		s.heads[r.CorrelationID] = head{hash: r.ContentHash, seq: r.Sequence}
	}
	s.seq += uint64(len(out))
	if len(s.heads) > headCacheSize {
		s.pruneHeads()
	}
	return out, nil
}

// pruneHeads drops cached heads whose records are committed; call with mu
// held.
func (s *Store) pruneHeads() {
	for corr, h := range s.heads {
		if h.seq <= s.written {
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
	if err := s.usable(); err != nil {
		return err
	}
	s.pos++
	r.Data = slices.Clone(r.Data) // the caller may reuse its buffer
	s.queue = append(s.queue, item{pos: s.pos, res: &r})
	return nil
}

// Sync implements evidence.Store with group commit: it returns once every
// record and result queued before the call is committed and fsynced.
func (s *Store) Sync(ctx context.Context, seq uint64) error {
	s.mu.Lock()
	target, err := s.pos, s.failed
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.gc.Sync(ctx, target)
}

// failure is why the store can no longer promise durability, or nil.
func (s *Store) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// commit writes everything queued in one transaction and returns the
// position it covers. Only one commit runs at a time (the Sync leader,
// also when Close syncs).
func (s *Store) commit() (uint64, error) {
	s.mu.Lock()
	batch := s.queue
	// After Close (which has made everything durable and waits out only a
	// commit already running) none may start on databases being closed.
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	s.mu.Unlock()
	if len(batch) == 0 {
		return 0, nil
	}
	// A commit must not be abandoned half way because one caller gave up:
	// it carries other callers' evidence.
	ctx := context.Background()
	err := s.insert(ctx, batch)
	if err == nil {
		s.cm.Lock()
		err = s.commitTx()
		s.mu.Lock()
		if err == nil {
			s.queue = append(s.queue[:0:0], s.queue[len(batch):]...)
			for _, it := range batch {
				if it.res == nil && it.rec.Sequence > s.written {
					s.written = it.rec.Sequence
				}
			}
		}
		s.mu.Unlock()
		s.cm.Unlock()
	}
	if err != nil {
		// What reached the file is unknown: refuse every later promise.
		s.mu.Lock()
		s.failed = fmt.Errorf("evidence sqlite: commit: %w", err)
		err = s.failed
		s.mu.Unlock()
		return 0, err
	}
	return batch[len(batch)-1].pos, nil
}

var errNoTx = errors.New("no transaction")

// insert starts the transaction and inserts the batch (not yet visible).
func (s *Store) insert(ctx context.Context, batch []item) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := insertRows(ctx, tx, batch); err != nil {
		_ = tx.Rollback()
		return err
	}
	s.tx = tx
	return nil
}

func (s *Store) commitTx() error {
	if s.tx == nil {
		return errNoTx
	}
	err := s.tx.Commit()
	s.tx = nil
	return err
}

// maxRowsPerStatement bounds a multi-row INSERT (6 parameters per event row,
// SQLite allows 32766).
const maxRowsPerStatement = 500

// insertRows inserts events with multi-row statements (one round trip into
// SQLite per 500 rows instead of per row) and results one by one.
func insertRows(ctx context.Context, tx *sql.Tx, batch []item) error {
	var rows []any
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		q := "INSERT INTO events (seq, corr, type, hash, prev, data) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?),", n), ",")
		_, err := tx.ExecContext(ctx, q, rows...)
		rows, n = rows[:0], 0
		return err
	}
	for _, it := range batch {
		if it.res != nil {
			continue
		}
		r := &it.rec
		rows = append(rows, int64(r.Sequence), r.CorrelationID, r.EventType, r.ContentHash, r.PrevHash, r.Data)
		if n++; n == maxRowsPerStatement {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for _, it := range batch {
		if r := it.res; r != nil {
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO results (invocation_id, at, data) VALUES (?, ?, ?)`,
				r.InvocationID, r.At.UnixMicro(), r.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

// Replay implements evidence.Store: committed records from the database,
// then queued ones.
func (s *Store) Replay(ctx context.Context, q evidence.Query) ([]evidence.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.cm.RLock()
	defer s.cm.RUnlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, evidence.ErrClosed
	}
	query := `SELECT seq, type, hash, prev, data FROM events WHERE corr = ? AND seq > ? ORDER BY seq`
	args := []any{q.CorrelationID, int64(q.After)}
	if q.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, q.Limit)
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("evidence sqlite: replay: %w", err)
	}
	defer rows.Close()
	var out []evidence.Record
	last := q.After
	for rows.Next() {
		r := evidence.Record{CorrelationID: q.CorrelationID}
		var seq int64
		if err := rows.Scan(&seq, &r.EventType, &r.ContentHash, &r.PrevHash, &r.Data); err != nil {
			return nil, fmt.Errorf("evidence sqlite: replay: %w", err)
		}
		r.Sequence = uint64(seq)
		last = r.Sequence
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence sqlite: replay: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.queue {
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
		if it.res == nil && it.rec.CorrelationID == q.CorrelationID && it.rec.Sequence > last {
			r := it.rec
			r.Data = append([]byte(nil), r.Data...)
			out = append(out, r)
		}
	}
	return out, nil
}

// Count implements evidence.Store.
func (s *Store) Count(ctx context.Context, correlationID, eventType string) (int, error) {
	s.cm.RLock()
	defer s.cm.RUnlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return 0, evidence.ErrClosed
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE corr = ? AND type = ?`, correlationID, eventType).Scan(&n); err != nil {
		return 0, fmt.Errorf("evidence sqlite: count: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.queue {
		if it.res == nil && it.rec.CorrelationID == correlationID && it.rec.EventType == eventType && it.rec.Sequence > s.written {
			n++
		}
	}
	return n, nil
}

// Results implements evidence.ResultStore: newest first, queued results
// included.
func (s *Store) Results(ctx context.Context, since time.Time, fn func(evidence.Result) bool) error {
	if err := s.Sync(ctx, 0); err != nil {
		return err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT invocation_id, at, data FROM results WHERE at >= ? ORDER BY at DESC, invocation_id`, since.UnixMicro())
	if err != nil {
		return fmt.Errorf("evidence sqlite: results: %w", err)
	}
	defer rows.Close()
	var all []evidence.Result
	for rows.Next() {
		var r evidence.Result
		var at int64
		if err := rows.Scan(&r.InvocationID, &at, &r.Data); err != nil {
			return fmt.Errorf("evidence sqlite: results: %w", err)
		}
		r.At = time.UnixMicro(at).UTC()
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("evidence sqlite: results: %w", err)
	}
	for _, r := range all {
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// LastSequence implements evidence.Store.
func (s *Store) LastSequence() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// Close commits what is queued and closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	err := s.Sync(context.Background(), 0)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.gc.Wait() // never close the databases under a commit in progress
	if rerr := s.r.Close(); err == nil {
		err = rerr
	}
	if werr := s.w.Close(); err == nil {
		err = werr
	}
	s.lock.Close()
	if errors.Is(err, evidence.ErrClosed) {
		err = nil
	}
	return err
}
