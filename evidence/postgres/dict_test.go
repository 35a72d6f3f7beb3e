package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/internal/hexpack"
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

// dictID names dictV1 in the zstd frames: one byte in each frame header.
const dictID = 1

func rand8() string { return fmt.Sprint(time.Now().UnixNano() % 1e8) }

// governedBodies returns the raw format 3 bodies of n governed invocations
// (five events and the recorded result riding with them) of a
// safety-gated capability, or of an ungated one when safety is nil, each
// invocation under its own random correlation as the boundary draws one.
func governedBodies(t testing.TB, n int, safety governance.SafetyEvaluator) [][]byte {
	var out [][]byte
	blocks := governedBlocks(t, n, safety)
	for i := range blocks {
		b := &blocks[i]
		out = append(out, rawBlock("", 0, b.recs, b.results, b.results[0].At))
	}
	return out
}

// governedBlocks is governedBodies' records and results, one block per
// invocation.
func governedBlocks(t testing.TB, n int, safety governance.SafetyEvaluator) []block {
	ctx := context.Background()
	s, err := sqlite.Open(t.TempDir()+"/e.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := boundary.New(boundary.Config{HostID: "host-" + rand8(), Store: s, Safety: safety})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Register(boundary.Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.get", Version: "1.0.0", Description: "echo"},
		Handler: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }}); err != nil {
		t.Fatal(err)
	}
	var corrs []string
	for i := range n {
		res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "kv.get", Payload: json.RawMessage(fmt.Sprintf(`{"key":"k%d"}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		corrs = append(corrs, res.Correlation.CorrelationID)
	}
	results := map[string]evidence.Result{}
	if err := s.Results(ctx, time.Time{}, func(r evidence.Result) bool {
		results[r.InvocationID] = r
		return true
	}); err != nil {
		t.Fatal(err)
	}
	var out []block
	for _, c := range corrs {
		recs, err := s.Replay(ctx, evidence.Query{CorrelationID: c})
		if err != nil {
			t.Fatal(err)
		}
		var res []evidence.Result
		for id, r := range results {
			if bytes.Contains(recs[len(recs)-1].Data, []byte(id)) {
				res = append(res, r)
			}
		}
		out = append(out, block{recs: recs, results: res})
	}
	return out
}

// BenchmarkEncodeBlock encodes the block of one governed invocation of a
// safety-gated capability (five events and its result), as a commit does.
func BenchmarkEncodeBlock(b *testing.B) {
	blocks := governedBlocks(b, 64, boundary.FixtureSafety())
	b.ResetTimer()
	for i := range b.N {
		blk := &blocks[i%len(blocks)]
		if _, err := encodeBlock("", 0, blk.recs, blk.results, blk.results[0].At); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBlock decodes what BenchmarkEncodeBlock encodes.
func BenchmarkDecodeBlock(b *testing.B) {
	blocks := governedBlocks(b, 64, boundary.FixtureSafety())
	rows := make([]blockRow, len(blocks))
	for i := range blocks {
		blk := &blocks[i]
		at := blk.results[0].At
		rows[i] = blockRow{last: blk.recs[len(blk.recs)-1].Sequence, resAt: at, body: must(encodeBlock("", 0, blk.recs, blk.results, at))}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := decodeBody("c", rows[i%len(rows)]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGenerateS2Dict wrote dict-v3.s2dict, with CAPMESH_GEN_DICT=3: an S2
// dictionary (body format 3) made of testdata/dict-history.txt and two
// raw bodies of governed invocations — one of a safety-gated capability,
// one not — all packed with hexpack, the bodies last. S2 matches the
// dictionary's bytes as they are, so it holds what bodies repeat: the
// events' structure, names and constants; their random hex can match
// nothing. Running it again makes a different dictionary (the bodies' ids
// are random), which only a new body format may use.
func TestGenerateS2Dict(t *testing.T) {
	if os.Getenv("CAPMESH_GEN_DICT") != "3" {
		t.Skip("set CAPMESH_GEN_DICT=3 to write a new S2 dictionary")
	}
	d := s2Dict(t, 1, 1)
	if err := os.WriteFile("dict-v3.s2dict", d.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// s2Dict makes an S2 dictionary of the packed history and gated and
// ungated sample bodies.
func s2Dict(t *testing.T, gated, ungated int) *s2.Dict {
	history, err := os.ReadFile("testdata/dict-history.txt")
	if err != nil {
		t.Fatal(err)
	}
	content := hexpack.Append(nil, history)
	for _, b := range append(governedBodies(t, ungated, nil), governedBodies(t, gated, boundary.FixtureSafety())...) {
		content = hexpack.Append(content, b)
	}
	d := s2.MakeDict(content, nil)
	if d == nil {
		t.Fatalf("no dictionary from %d bytes", len(content))
	}
	return d
}
