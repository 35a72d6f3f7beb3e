package etcd

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestTakeBoundsBytes: group commit takes, in order, the calls whose keys
// and values fit maxTxnBytes together; a call that would pass it waits
// for the next transaction (and so does any later call on its keys), and
// a call larger than maxTxnBytes goes alone.
func TestTakeBoundsBytes(t *testing.T) {
	call := func(key string, size int) *pending {
		return &pending{ops: []clientv3.Op{clientv3.OpPut(key, "")}, keys: map[string]bool{key: true}, size: size}
	}
	big1, big2, small, huge := call("a", 700<<10), call("b", 700<<10), call("c", 100), call("d", 2<<20)
	b := batcher{inflight: map[string]bool{}, queue: []*pending{big1, big2, small, huge}}
	for i, want := range [][]*pending{{big1, small}, {big2}, {huge}} {
		got := b.take()
		if len(got) != len(want) {
			t.Fatalf("transaction %d: %d calls, want %d", i, len(got), len(want))
		}
		for j := range got {
			if got[j] != want[j] {
				t.Errorf("transaction %d: call %d is not the expected one", i, j)
			}
		}
		clear(b.inflight)
	}
	if len(b.queue) != 0 {
		t.Errorf("%d calls left in the queue", len(b.queue))
	}
}
