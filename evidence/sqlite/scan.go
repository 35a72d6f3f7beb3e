package sqlite

import (
	"context"
	"fmt"

	"github.com/capmesh/capmesh/evidence"
)

// Scan implements evidence.Scanner: every record after after, committed
// or still queued, in global sequence order.
func (s *Store) Scan(ctx context.Context, after uint64, fn func(evidence.Record) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.cm.RLock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		s.cm.RUnlock()
		return evidence.ErrClosed
	}
	rows, err := s.r.QueryContext(ctx, `SELECT corr, seq, type, hash, prev, data FROM events WHERE seq > ? ORDER BY seq`, int64(after))
	if err != nil {
		s.cm.RUnlock()
		return fmt.Errorf("evidence sqlite: scan: %w", err)
	}
	var out []evidence.Record
	last := after
	for rows.Next() {
		var r evidence.Record
		var seq int64
		if err := rows.Scan(&r.CorrelationID, &seq, &r.EventType, &r.ContentHash, &r.PrevHash, &r.Data); err != nil {
			rows.Close()
			s.cm.RUnlock()
			return fmt.Errorf("evidence sqlite: scan: %w", err)
		}
		r.Sequence = uint64(seq)
		last = r.Sequence
		out = append(out, r)
	}
	err = rows.Err()
	rows.Close()
	if err == nil {
		s.mu.Lock()
		for _, it := range s.queue {
			if it.res == nil && it.rec.Sequence > last {
				r := it.rec
				r.Data = append([]byte(nil), r.Data...)
				out = append(out, r)
			}
		}
		s.mu.Unlock()
	}
	s.cm.RUnlock()
	if err != nil {
		return fmt.Errorf("evidence sqlite: scan: %w", err)
	}
	for _, r := range out {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
