package evidence

import "sort"

// Chain is the in-memory index of one correlation, shared by the stores:
// the place of each record (ascending sequence, a per-engine locator and
// size), the head content hash and per-event-type counts. The first records
// and counts live inline, so indexing a short correlation — most are one or
// two invocations — costs one allocation.
type Chain struct {
	// Head is the content hash of the correlation's last record.
	Head string

	n      int
	inl    [2]ChainEntry
	more   []ChainEntry
	counts [3]typeCount
	extra  []typeCount
}

// ChainEntry locates one record of a chain.
type ChainEntry struct {
	Seq  uint64
	Loc  int64
	Size uint32
}

type typeCount struct {
	typ string
	n   int
}

// Add indexes one record. Records must be added in ascending sequence.
func (c *Chain) Add(seq uint64, loc int64, size uint32, eventType, hash string) {
	e := ChainEntry{Seq: seq, Loc: loc, Size: size}
	if c.n < len(c.inl) {
		c.inl[c.n] = e
	} else {
		c.more = append(c.more, e)
	}
	c.n++
	c.Head = hash
	for i := range c.counts {
		switch c.counts[i].typ {
		case eventType:
			c.counts[i].n++
			return
		case "":
			c.counts[i] = typeCount{eventType, 1}
			return
		}
	}
	for i := range c.extra {
		if c.extra[i].typ == eventType {
			c.extra[i].n++
			return
		}
	}
	c.extra = append(c.extra, typeCount{eventType, 1})
}

// Len is the number of records indexed.
func (c *Chain) Len() int { return c.n }

// At returns the i-th record's entry, 0 <= i < Len().
func (c *Chain) At(i int) ChainEntry {
	if i < len(c.inl) {
		return c.inl[i]
	}
	return c.more[i-len(c.inl)]
}

// Count returns the number of records of eventType.
func (c *Chain) Count(eventType string) int {
	for _, tc := range c.counts {
		if tc.typ == eventType {
			return tc.n
		}
	}
	for _, tc := range c.extra {
		if tc.typ == eventType {
			return tc.n
		}
	}
	return 0
}

// Select returns the index range [from, to) of the records q selects.
func (c *Chain) Select(q Query) (from, to int) {
	from = sort.Search(c.n, func(i int) bool { return c.At(i).Seq > q.After })
	to = c.n
	if q.Limit > 0 && to-from > q.Limit {
		to = from + q.Limit
	}
	return from, to
}
