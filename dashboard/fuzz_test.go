package dashboard

import (
	"testing"
)

// FuzzVerifyEvidence: whatever a node answers to chp.export (the
// standalone dashboard may face any node), the evidence page's
// verification returns a view, never panics, and never calls a chain
// verified with a step that is not.
func FuzzVerifyEvidence(f *testing.F) {
	f.Add([]byte(`{"events":[],"host_id":"h","root_hash":"x"}`))
	f.Add([]byte(`{"events":[{"sequence":1,"content_hash":"a","prev_hash":null}],"host_id":"h","root_hash":"a"}`))
	f.Add([]byte(`{"events":[{"sequence":"x"}],"host_id":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v := verifyEvidence("corr", data)
		if v == nil {
			t.Fatal("nil view")
		}
		if v.Valid {
			for _, s := range v.Events {
				if !s.OK {
					t.Fatalf("a valid chain with a failing step: %+v", s)
				}
			}
		}
	})
}
