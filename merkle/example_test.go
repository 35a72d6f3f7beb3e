package merkle_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/merkle"
)

// A log appends its events, signs heads, and serves proofs; a client checks
// them offline with the log's public key alone.
func Example() {
	key, _ := identity.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	events := []string{"bind", "invoke", "result", "bind", "invoke"}

	// The log.
	var tree merkle.Tree
	for _, e := range events[:3] {
		tree.Append(merkle.LeafHash([]byte(e)))
	}
	older, _ := tree.SignHead(key, tree.Size(), time.Unix(1_800_000_000, 0))
	for _, e := range events[3:] {
		tree.Append(merkle.LeafHash([]byte(e)))
	}
	newer, _ := tree.SignHead(key, tree.Size(), time.Unix(1_800_000_060, 0))
	inclusion, _ := tree.InclusionProof(1, newer.TreeSize)
	consistency, _ := tree.ConsistencyProof(older.TreeSize, newer.TreeSize)

	// The client.
	pub := key.Public()
	leaf := merkle.LeafHash([]byte("invoke"))
	fmt.Println("event 1 in head 5:", merkle.VerifyInclusion(pub, newer, leaf, inclusion))
	fmt.Println("head 3 prefix of head 5:", merkle.VerifyConsistency(pub, older, newer, consistency))
	forged := merkle.LeafHash([]byte("forged"))
	fmt.Println("forged event:", merkle.VerifyInclusion(pub, newer, forged, inclusion) != nil)
	// Output:
	// event 1 in head 5: <nil>
	// head 3 prefix of head 5: <nil>
	// forged event: true
}
