package registry

import (
	"testing"

	"github.com/capmesh/capmesh/registry/internal/refusal"
	"github.com/capmesh/capmesh/registry/internal/state"
)

// TestRefusalWordsAgree: the words and reasons package registry exports
// are the ones its internal packages refuse and check with, so that the
// status table (registry/internal/refusal) and the revocation checks
// (registry/internal/state) see the words clients are told of.
func TestRefusalWordsAgree(t *testing.T) {
	for exported, internal := range map[string]string{
		CodeWordNotRegistered:    refusal.NotRegistered,
		CodeWordUnsignedRemote:   refusal.UnsignedRemote,
		CodeWordForeignUser:      refusal.ForeignUser,
		CodeWordIdentityProbe:    refusal.IdentityProbe,
		CodeWordIdentityMismatch: refusal.IdentityMismatch,
		CodeWordInvalidParams:    refusal.InvalidParams,
		CodeWordNoProvider:       refusal.NoProvider,
		CodeWordCompacted:        refusal.Compacted,
		CodeWordReplay:           refusal.Replay,
		CodeWordConcurrentChange: refusal.ConcurrentChange,
		CodeWordStoreUnavailable: refusal.StoreUnavailable,
		CodeWordNameInUse:        refusal.NameInUse,
		CodeWordNotRegistrant:    refusal.NotRegistrant,
		CodeWordHopLimit:         refusal.HopLimit,
		CodeWordSelfRoute:        refusal.SelfRoute,
		CodeWordLocalEndpoint:    refusal.LocalEndpoint,
		ReasonCessation:          state.ReasonCessation,
		ReasonSuperseded:         state.ReasonSuperseded,
		ReasonUnspecified:        state.ReasonUnspecified,
	} {
		if exported != internal {
			t.Errorf("registry exports %q, the internal packages use %q", exported, internal)
		}
	}
}
