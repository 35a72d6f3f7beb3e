package evidence

import (
	"context"
	"slices"
)

// Scanner is implemented by stores that can replay every record, of every
// correlation, in global sequence order — what a log over the whole store
// (the witnessed store head, the Merkle event log) is rebuilt from at
// start. Memory, logstore and sqlite implement it.
type Scanner interface {
	// Scan calls fn for each record with Sequence > after, in ascending
	// sequence order, and stops at fn's first error, which it returns.
	// Records appended while Scan runs may or may not be visited.
	Scan(ctx context.Context, after uint64, fn func(Record) error) error
}

// ScanCorrelations is a Scan for a store that can only list its
// correlations: it replays each and merges the records by sequence. It
// holds every record after after in memory at once.
func ScanCorrelations(ctx context.Context, s Store, correlations []string, after uint64, fn func(Record) error) error {
	var all []Record
	for _, c := range correlations {
		recs, err := s.Replay(ctx, Query{CorrelationID: c, After: after})
		if err != nil {
			return err
		}
		all = append(all, recs...)
	}
	slices.SortFunc(all, func(a, b Record) int {
		switch {
		case a.Sequence < b.Sequence:
			return -1
		case a.Sequence > b.Sequence:
			return 1
		}
		return 0
	})
	for _, r := range all {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Scan implements Scanner.
func (m *Memory) Scan(ctx context.Context, after uint64, fn func(Record) error) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	var recs []Record
	if after < uint64(len(m.recs)) {
		recs = slices.Clone(m.recs[after:])
	}
	m.mu.Unlock()
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
