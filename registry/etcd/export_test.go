package etcd

import clientv3 "go.etcd.io/etcd/client/v3"

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

// ClientConfig is the etcd client configuration Open would use, after
// its checks.
func (o Options) ClientConfig() (clientv3.Config, error) { return o.clientConfig() }
