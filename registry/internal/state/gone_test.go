package state

import (
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/store"
)

// TestOwnDeletionForgottenOnceTheFeedPassesIt: an own deletion is kept
// (Shared.Gone) only until the feed reaches its revision. A deletion of a
// record that did not exist — a revocation deletes the key's descriptor
// record whether or not one is registered — brings no change of that key
// through the feed; before, its entry stayed for good, one per such
// deletion.
func TestOwnDeletionForgottenOnceTheFeedPassesIt(t *testing.T) {
	now := time.Now()
	s := newState(t, now)
	s.Follow("n1")
	s.Written([]store.Op{{Record: store.Record{Kind: KindDescriptor, Key: "absent"}, Delete: true}}, 10)
	if len(s.Shared.Gone) != 1 {
		t.Fatalf("own deletion not recorded: %v", s.Shared.Gone)
	}
	// A change of an older revision, delivered late, leaves it.
	if _, _, err := s.ApplyChange(store.Change{Op: store.Op{Record: store.Record{Kind: KindCert, Key: "absent"}}, Revision: 9}, nil, now); err != nil {
		t.Fatal(err)
	}
	if len(s.Shared.Gone) != 1 {
		t.Fatalf("the deletion was forgotten before the feed reached it: %v", s.Shared.Gone)
	}
	// A change of another key at a later revision: the feed is past it.
	if _, _, err := s.ApplyChange(store.Change{Op: store.Op{Record: store.Record{Kind: KindCert, Key: "other"}}, Revision: 11}, nil, now); err != nil {
		t.Fatal(err)
	}
	if len(s.Shared.Gone) != 0 {
		t.Fatalf("own deletions kept after the feed passed them: %v", s.Shared.Gone)
	}
}
