package evidence

import "sort"

// Chain is the in-memory index of one correlation, shared by the stores: the
// sequences of its records (ascending), a per-engine locator for each, the
// head content hash and per-event-type counts.
type Chain struct {
	Seqs   []uint64
	Locs   []int64
	Sizes  []uint32
	Head   string
	counts []typeCount
}

type typeCount struct {
	typ string
	n   int
}

// Add indexes one record.
func (c *Chain) Add(seq uint64, loc int64, size uint32, eventType, hash string) {
	c.Seqs = append(c.Seqs, seq)
	c.Locs = append(c.Locs, loc)
	c.Sizes = append(c.Sizes, size)
	c.Head = hash
	for i := range c.counts {
		if c.counts[i].typ == eventType {
			c.counts[i].n++
			return
		}
	}
	c.counts = append(c.counts, typeCount{eventType, 1})
}

// Count returns the number of records of eventType.
func (c *Chain) Count(eventType string) int {
	for _, tc := range c.counts {
		if tc.typ == eventType {
			return tc.n
		}
	}
	return 0
}

// Select returns the index range [from, to) of the records q selects.
func (c *Chain) Select(q Query) (from, to int) {
	from = sort.Search(len(c.Seqs), func(i int) bool { return c.Seqs[i] > q.After })
	to = len(c.Seqs)
	if q.Limit > 0 && to-from > q.Limit {
		to = from + q.Limit
	}
	return from, to
}
