package state

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/store"
)

// TestMissingNamesWhatTheSnapshotLacks: after a resync's snapshot, the
// records the node holds that the snapshot lacks are deleted at the
// snapshot's revision — another node's local registration with its
// owner, a nonce with the \x00 its key holds — and nothing the snapshot
// has.
func TestMissingNamesWhatTheSnapshotLacks(t *testing.T) {
	s := newState(t, time.Now())
	s.Follow("node-a")
	s.Shared.Revs[RevKey(KindDescriptor, "kept", "")] = 3
	s.Shared.Revs[RevKey(KindDescriptor, "gone", "")] = 4
	s.Shared.Revs[RevKey(KindLocal, "local:x", "node-b")] = 5
	s.Shared.Revs[RevKey(KindNonce, "admin:op\x00n1", "")] = 6
	var kept store.Change
	kept.Kind, kept.Key, kept.Revision = KindDescriptor, "kept", 3
	got := s.Missing([]store.Change{kept}, 9)
	slices.SortFunc(got, func(a, b store.Change) int { return strings.Compare(a.Kind+a.Key, b.Kind+b.Key) })
	want := []struct{ kind, key, node string }{
		{KindDescriptor, "gone", ""},
		{KindLocal, "local:x", "node-b"},
		{KindNonce, "admin:op\x00n1", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("Missing = %+v, want %d deletions", got, len(want))
	}
	for i, w := range want {
		if g := got[i]; g.Kind != w.kind || g.Key != w.key || g.Node != w.node || !g.Delete || g.Revision != 9 {
			t.Errorf("deletion %d = %+v, want %s %q of %q at 9", i, g, w.kind, w.key, w.node)
		}
	}
}

// TestRegisteredOnlyBeforeTheFeed: a node's own registration written at
// rev is recorded and published only when neither the feed (the
// version) nor a later change of the key reached rev already.
func TestRegisteredOnlyBeforeTheFeed(t *testing.T) {
	s := newState(t, time.Now())
	s.Follow("node-a")
	s.Version = 10
	if !s.Registered("k", 11, true) {
		t.Fatal("a write ahead of the feed is not published")
	}
	if s.Shared.Revs[RevKey(KindDescriptor, "k", "")] != 11 || s.Shared.Revs[RevKey(KindMark, "k", "")] != 11 {
		t.Errorf("revisions not recorded: %v", s.Shared.Revs)
	}
	if s.Registered("k", 11, false) {
		t.Error("a write the key's revision already covers is published again")
	}
	if s.Registered("j", 10, false) {
		t.Error("a write the feed already delivered is published again")
	}
	if _, ok := s.Shared.Revs[RevKey(KindMark, "j", "")]; ok {
		t.Error("a watermark revision recorded for a write without one")
	}
}
