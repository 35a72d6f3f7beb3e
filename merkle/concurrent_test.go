package merkle

import (
	"sync"
	"testing"
)

// TestConcurrentAppendAndProve appends while other goroutines prove: every
// proof, taken at whatever size the tree had, must verify against the root
// of that size (run under -race, this also checks the locking).
func TestConcurrentAppendAndProve(t *testing.T) {
	const n = 2000
	leaves := testLeaves(n)
	roots := refRoots(leaves)
	var tree Tree
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for _, h := range leaves {
			tree.Append(h)
		}
	}()
	errs := make(chan error, 4)
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(g); ; i++ {
				select {
				case <-done:
					return
				default:
				}
				size := tree.Size()
				if size == 0 {
					continue
				}
				p, err := tree.InclusionProof(i%size, size)
				if err == nil {
					err = p.Verify(leaves[i%size], roots[size])
				}
				if err == nil {
					var c ConsistencyProof
					if c, err = tree.ConsistencyProof(size/2, size); err == nil {
						err = c.Verify(roots[size/2], roots[size])
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := tree.Root(); got != roots[n] {
		t.Errorf("Root = %s, want %s", got, roots[n])
	}
}
