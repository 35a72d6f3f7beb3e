package logstore

// PhysicalSize is where the data written ends in the file (the zeros
// prepared ahead come after it), for the tests of package logstore_test.
func (s *Store) PhysicalSize() int64 {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.phys
}
