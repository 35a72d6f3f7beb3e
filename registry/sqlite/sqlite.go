// Package sqlite is the registry's embedded durable store: one SQLite file
// (pure Go, modernc.org/sqlite) in the node's private state directory.
//
// The registry keeps its indexes in memory and reads from them; this store
// only has to make each change durable and give everything back at start.
// Writes are single transactions in WAL mode with synchronous=NORMAL, so a
// committed change survives a process crash (and an OS crash loses at most
// the last few transactions). The file and its -wal/-shm companions are
// created 0600.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/capmesh/capmesh/registry"
)

// Store is a registry.Store backed by SQLite.
type Store struct {
	db *sql.DB
}

var _ registry.Store = (*Store)(nil)

const schema = `
CREATE TABLE IF NOT EXISTS records (
	kind TEXT NOT NULL,
	key TEXT NOT NULL,
	value BLOB NOT NULL,
	expires_at INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (kind, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_expiry ON records (expires_at) WHERE expires_at != 0;
`

// Open opens (creating if needed, mode 0600) the database at path.
func Open(path string) (*Store, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("registry store: %w", err)
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("registry store: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("registry store: %s has mode %#o; it must not be readable by others (chmod 600)", path, fi.Mode().Perm())
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("registry store: %w", err)
	}
	// One writer; SQLite serializes writes anyway and one connection keeps
	// pragmas and the WAL consistent.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("registry store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Apply implements registry.Store.
func (s *Store) Apply(ctx context.Context, ops ...registry.Op) (err error) {
	if len(ops) == 0 {
		return ctx.Err()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("registry store: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	for _, op := range ops {
		if op.Delete {
			_, err = tx.ExecContext(ctx, `DELETE FROM records WHERE kind = ? AND key = ?`, op.Kind, op.Key)
		} else {
			v := op.Value
			if v == nil {
				v = []byte{}
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO records (kind, key, value, expires_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
				op.Kind, op.Key, v, nanos(op.ExpiresAt))
		}
		if err != nil {
			return fmt.Errorf("registry store: %w", err)
		}
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("registry store: commit: %w", err)
	}
	return nil
}

// List implements registry.Store.
func (s *Store) List(ctx context.Context, kind string, now time.Time) ([]registry.Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key, value, expires_at FROM records
		WHERE kind = ? AND (expires_at = 0 OR expires_at > ?) ORDER BY key`, kind, now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("registry store: %w", err)
	}
	defer rows.Close()
	var out []registry.Record
	for rows.Next() {
		var r registry.Record
		var exp int64
		if err := rows.Scan(&r.Key, &r.Value, &exp); err != nil {
			return nil, fmt.Errorf("registry store: %w", err)
		}
		r.Kind = kind
		if exp != 0 {
			r.ExpiresAt = time.Unix(0, exp).UTC()
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Purge implements registry.Store.
func (s *Store) Purge(ctx context.Context, now time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM records WHERE expires_at != 0 AND expires_at <= ?`, now.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("registry store: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// Close implements registry.Store.
func (s *Store) Close() error {
	if s.db == nil {
		return errors.New("registry store: already closed")
	}
	err := s.db.Close()
	s.db = nil
	return err
}
