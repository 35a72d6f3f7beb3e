package evidence_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/evidence/sqlite"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// TestScanGlobalOrder: every store's Scan visits each record after
// `after` once, in global sequence order across correlations, with the
// bytes Replay returns — before and after a reopen for the durable ones.
func TestScanGlobalOrder(t *testing.T) {
	for name, open := range map[string]func(dir string) (evidence.Store, error){
		"memory":   func(string) (evidence.Store, error) { return evidence.NewMemory(), nil },
		"logstore": func(dir string) (evidence.Store, error) { return logstore.Open(dir, nil) },
		"sqlite":   func(dir string) (evidence.Store, error) { return sqlite.Open(dir, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "ev")
			st, err := open(dir)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 12 {
				if _, err := st.Append(ctx, storetest.Event(fmt.Sprintf("c%d", (i*7)%5), "e", fmt.Sprintf("body-%02d", i))); err != nil {
					t.Fatal(err)
				}
			}
			check := func(st evidence.Store, after uint64) {
				t.Helper()
				var got []evidence.Record
				if err := st.(evidence.Scanner).Scan(ctx, after, func(r evidence.Record) error {
					got = append(got, r)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if len(got) != 12-int(after) {
					t.Fatalf("after %d: %d records", after, len(got))
				}
				for i, r := range got {
					if r.Sequence != after+uint64(i)+1 {
						t.Fatalf("record %d has sequence %d", i, r.Sequence)
					}
					rep, err := st.Replay(ctx, evidence.Query{CorrelationID: r.CorrelationID, After: r.Sequence - 1, Limit: 1})
					if err != nil || len(rep) != 1 || string(rep[0].Data) != string(r.Data) || rep[0].ContentHash != r.ContentHash {
						t.Fatalf("sequence %d differs from its replay: %v", r.Sequence, err)
					}
				}
			}
			check(st, 0)
			check(st, 5)
			if name == "memory" {
				return
			}
			if err := st.Sync(ctx, st.LastSequence()); err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if st, err = open(dir); err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			check(st, 0)
		})
	}
}
