package etcd

// Kill stops the store as a killed process does: no more keep-alives, no
// revocation of the node's lease, the connection dropped.
func (s *Store) Kill() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	<-s.kaDone
	s.batch.wait()
	_ = s.c.Close()
}
