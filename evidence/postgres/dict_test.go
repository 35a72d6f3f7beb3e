package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/sqlite"
)

// TestGenerateDict wrote dict-v1.zdict, with CAPMESH_GEN_DICT=1: a zstd
// dictionary trained on the raw bodies and results of 400 governed
// invocations (safety-gated and not), over testdata/dict-history.txt. It
// documents how the dictionary was made; running it again makes a
// different dictionary, which only a new body format may use.
func TestGenerateDict(t *testing.T) {
	if os.Getenv("CAPMESH_GEN_DICT") != "1" {
		t.Skip("set CAPMESH_GEN_DICT=1 to write a new dictionary")
	}
	ctx := context.Background()
	history, err := os.ReadFile("testdata/dict-history.txt")
	if err != nil {
		t.Fatal(err)
	}
	var samples [][]byte
	for _, safety := range []governance.SafetyEvaluator{boundary.FixtureSafety(), nil} {
		s, err := sqlite.Open(t.TempDir()+"/e.db", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := boundary.New(boundary.Config{HostID: "host-" + rand8(), Store: s, Safety: safety})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Register(boundary.Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.get", Version: "1.0.0", Description: "echo"},
			Handler: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }}); err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "kv.get", Payload: json.RawMessage(fmt.Sprintf(`{"key":"k%d"}`, i))})
			if err != nil {
				t.Fatal(err)
			}
			recs, err := s.Replay(ctx, evidence.Query{CorrelationID: res.Correlation.CorrelationID})
			if err != nil {
				t.Fatal(err)
			}
			samples = append(samples, rawBlock("", 0, recs, nil, time.Time{}))
		}
		if err := s.Results(ctx, time.Time{}, func(r evidence.Result) bool {
			samples = append(samples, append(appendRef(nil, r.Data, r.InvocationID), r.Data...))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	d, err := zstd.BuildDict(zstd.BuildDictOptions{ID: dictID, Contents: samples, History: history,
		Offsets: [3]int{1, 4, 8}, Level: zstd.SpeedFastest})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("dict-v1.zdict", d, 0o644); err != nil {
		t.Fatal(err)
	}
}

func rand8() string { return fmt.Sprint(time.Now().UnixNano() % 1e8) }
