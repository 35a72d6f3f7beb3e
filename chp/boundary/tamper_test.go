package boundary

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
)

// tamperStore is an evidence store whose Replay hands out an edited copy of
// one record, as a store someone wrote to behind the host's back would.
type tamperStore struct {
	evidence.Store
	seq  uint64
	edit func(r *evidence.Record)
}

func (s *tamperStore) Replay(ctx context.Context, q evidence.Query) ([]evidence.Record, error) {
	recs, err := s.Store.Replay(ctx, q)
	for i := range recs {
		if recs[i].Sequence == s.seq && s.edit != nil {
			recs[i].Data = bytes.Clone(recs[i].Data)
			s.edit(&recs[i])
		}
	}
	return recs, err
}

// TestVerifyDetectsStoreTampering: Boundary.Verify (the host's /verify)
// fails, naming the sequence, for any edit of a stored event — a stable
// member, an attribution member, the payload, the chain link — or of the
// hashes the store recorded beside it.
func TestVerifyDetectsStoreTampering(t *testing.T) {
	replace := func(old, new string) func(r *evidence.Record) {
		return func(r *evidence.Record) {
			if !bytes.Contains(r.Data, []byte(old)) {
				t.Fatalf("stored event lacks %s: %s", old, r.Data)
			}
			r.Data = bytes.Replace(r.Data, []byte(old), []byte(new), 1)
		}
	}
	for name, edit := range map[string]func(r *evidence.Record){
		"event_type":     replace(`"event_type":"execution_completed"`, `"event_type":"execution_failed"`),
		"subject":        replace(`"subject":{"id":"alice"`, `"subject":{"id":"mallo"`),
		"payload":        replace(`"capability_uri":"conformance.echo:1.0.0"`, `"capability_uri":"conformance.evil:1.0.0"`),
		"redacted":       replace(`"redacted":true`, `"redacted":false`),
		"prev_hash":      func(r *evidence.Record) { r.PrevHash = strings.Repeat("0", 64) },
		"content_hash":   func(r *evidence.Record) { r.ContentHash = strings.Repeat("0", 64) },
		"undecodable":    func(r *evidence.Record) { r.Data = r.Data[:len(r.Data)-1] },
		"no_hash_member": replace(`"content_hash":"`, `"content_hash_":"`),
	} {
		t.Run(name, func(t *testing.T) {
			st := &tamperStore{Store: evidence.NewMemory()}
			b, err := New(Config{HostID: "tamper-host", Store: st})
			if err != nil {
				t.Fatal(err)
			}
			if err := RegisterFixtures(b); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "conformance.echo", Subject: json.RawMessage(`{"id":"alice","type":"user"}`),
				Correlation: chp.CorrelationContext{CorrelationID: "t"}})
			if err != nil || !res.Success {
				t.Fatalf("%+v %v", res, err)
			}
			if v, err := b.Verify(ctx, "t"); err != nil || !v.Valid || v.VerifiedCount != 2 {
				t.Fatalf("untouched: %+v %v", v, err)
			}
			st.seq, st.edit = 2, edit // execution_completed
			v, err := b.Verify(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if v.Valid || v.FirstBrokenSequence == nil || *v.FirstBrokenSequence != 2 || v.Reason == "" {
				t.Errorf("tampered store verified: %+v", v)
			}
		})
	}
}
