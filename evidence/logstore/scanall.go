package logstore

import (
	"context"

	"github.com/capmesh/capmesh/evidence"
)

// Scan implements evidence.Scanner: every record after after, in global
// sequence order, read back and checked as Replay reads them.
func (s *Store) Scan(ctx context.Context, after uint64, fn func(evidence.Record) error) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return evidence.ErrClosed
	}
	corrs := make([]string, 0, len(s.chains))
	for c := range s.chains {
		corrs = append(corrs, c)
	}
	s.mu.RUnlock()
	return evidence.ScanCorrelations(ctx, s, corrs, after, fn)
}
