package evidence

// NewCollidingMemory returns a Memory in which every correlation id hashes
// alike, so the suite exercises the index's collision path.
func NewCollidingMemory() *Memory {
	m := NewMemory()
	m.allCollide = true
	return m
}

// MappedBytes reports the bytes of memory arenas mapped outside the heap and
// not yet released.
func MappedBytes() int64 { return mappedBytes.Load() }
