package fingerprint

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capmesh/capmesh/canonical"
)

// benchObject is a ~2 KB nested object with unsorted ASCII and non-ASCII
// keys, index keys, numbers and strings.
var benchObject = []byte(`{
 "toolName": "memory_search", "version": "1.4.2", "10": "ten", "2": "two",
 "inputSchema": {"type": "object", "$schema": "https://json-schema.org/draft/2020-12/schema", "additionalProperties": false,
  "required": ["query", "limit"], "properties": {"query": {"type": "string", "minLength": 1, "description": "What to look for"},
  "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}, "filters": {"type": "object",
  "properties": {"tags": {"type": "array", "items": {"type": "string"}}, "since": {"type": "string", "format": "date-time"},
  "owner": {"type": "string"}}}}},
 "policies": [{"id": "tenant-scope", "executeBinding": "live"}, {"id": "rate-limit", "executeBinding": "hint"}],
 "context": {"subjectId": "user-1", "traceId": "tr-9f86d081884c7d65", "région": "île-de-france", "Zoë": true, "_internal": null,
  "budget": {"tokens": 120000, "usd": 1.25, "ratio": 1e-7}, "labels": ["alpha", "beta", "gamma", "δέλτα", "😀"]},
 "instructions": ["Prefer recent documents.", "Never reveal secrets.", "Cite sources with links.", "Answer in the user's language."],
 "metrics": {"calls": 4711, "errors": 3, "p50_ms": 12.5, "p99_ms": 180.25, "bytes_in": 1048576, "bytes_out": 2097152},
 "history": [{"at": "2026-07-01T12:00:00Z", "event": "registered", "by": "ops"}, {"at": "2026-07-02T08:30:00Z", "event": "updated", "by": "ci"},
  {"at": "2026-07-03T17:45:00Z", "event": "audited", "by": "sec", "notes": "policy bindings verified; no drift"}],
 "owner": {"team": "search", "email": "search@example.org", "oncall": ["ana", "bo", "chen"], "escalation": {"after_min": 30, "to": "platform"}}
}`)

func benchTool(i int) *Tool {
	return &Tool{
		Name:         fmt.Sprintf("tool_%02d", i),
		Description:  sp("Searches the memory store and returns the best matching documents."),
		InputSchema:  StandardSchema("zod", 1),
		Instructions: []string{"Prefer recent documents.", "Cite sources.", "Keep answers short."},
		Policies:     []Policy{{ID: "tenant-scope"}, {ID: "rate-limit", ExecuteBinding: sp("hint")}},
	}
}

func benchToolkit() *Toolkit {
	k := &Toolkit{Name: "root", Instructions: []string{"Be helpful."}}
	for i := range 20 {
		k.Members = append(k.Members, benchTool(19-i))
	}
	return k
}

// floor hashes the already-canonical bytes of payload with SHA-256.
func floor(b *testing.B, payload canonical.Value) {
	out, err := canonical.Khoralabs.AppendCanonical(nil, payload)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		_ = sha256.Sum256(out)
	}
}

func BenchmarkHashObject(b *testing.B) {
	v, err := canonical.Parse(benchObject)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fingerprint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := HashPlainObject(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sha256-floor", func(b *testing.B) { floor(b, v) })
}

func BenchmarkHashTool(b *testing.B) {
	t := benchTool(1)
	b.Run("fingerprint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := t.StaticHash(); err != nil {
				b.Fatal(err)
			}
		}
	})
	p, _ := t.StaticPayload()
	b.Run("sha256-floor", func(b *testing.B) { floor(b, p) })
}

// BenchmarkHashToolkit20 hashes a toolkit of 20 tools: 21 hashes (each
// member's static hash, then the toolkit payload). Its floor is SHA-256
// over the same 21 canonical byte strings.
func BenchmarkHashToolkit20(b *testing.B) {
	k := benchToolkit()
	b.Run("fingerprint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := k.StaticHash(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sha256-floor", func(b *testing.B) {
		var outs [][]byte
		for _, m := range k.Members {
			p, _ := m.(*Tool).StaticPayload()
			out, _ := canonical.Khoralabs.AppendCanonical(nil, p)
			outs = append(outs, out)
		}
		p, _ := k.StaticPayload()
		out, _ := canonical.Khoralabs.AppendCanonical(nil, p)
		outs = append(outs, out)
		b.ReportAllocs()
		for b.Loop() {
			for _, o := range outs {
				_ = sha256.Sum256(o)
			}
		}
	})
}

// BenchmarkVsFloor runs the floor and the fingerprint alternately, in
// blocks of 16 calls each, and reports the median per-call time of each
// over all blocks (floor_ns, fp_ns) and their ratio (x_floor). On a shared,
// loaded machine the load then falls on both alike, and medians ignore the
// blocks a preemption landed in.
func BenchmarkVsFloor(b *testing.B) {
	v, err := canonical.Parse(benchObject)
	if err != nil {
		b.Fatal(err)
	}
	t := benchTool(1)
	k := benchToolkit()
	canon := func(p canonical.Value, err error) []byte {
		if err != nil {
			b.Fatal(err)
		}
		out, err := canonical.Khoralabs.AppendCanonical(nil, p)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	objBytes := canon(v, nil)
	toolBytes := canon(t.StaticPayload())
	var kitBytes [][]byte
	for _, m := range k.Members {
		kitBytes = append(kitBytes, canon(m.(*Tool).StaticPayload()))
	}
	kitBytes = append(kitBytes, canon(k.StaticPayload()))
	jsonBuf := make([]byte, 0, 4096)
	cases := []struct {
		name      string
		floor, fp func()
	}{
		{"object", func() { sha256.Sum256(objBytes) }, func() { HashPlainObject(v) }},
		// The writing floor: the same tree written in input order with no
		// key sorting (Value.AppendJSON) and hashed. No canonical form can
		// be produced from a tree with less work.
		{"object-unsorted-json", func() { sha256.Sum256(objBytes) }, func() {
			out, _ := v.AppendJSON(jsonBuf[:0])
			sha256.Sum256(out)
		}},
		{"object-from-text", func() { sha256.Sum256(objBytes) }, func() {
			v, _ := canonical.Parse(benchObject)
			HashPlainObject(v)
		}},
		{"tool", func() { sha256.Sum256(toolBytes) }, func() { t.StaticHash() }},
		{"toolkit20", func() {
			for _, o := range kitBytes {
				sha256.Sum256(o)
			}
		}, func() { k.StaticHash() }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			floor, fp := vsFloor(b, c.floor, c.fp)
			b.ReportMetric(floor, "floor_ns")
			b.ReportMetric(fp, "fp_ns")
			b.ReportMetric(fp/floor, "x_floor")
		})
	}
}

// vsFloor alternates blocks of floor and fp calls for b.N iterations and
// returns the median per-call nanoseconds of each.
func vsFloor(b *testing.B, floor, fp func()) (floorNs, fpNs float64) {
	const block = 16
	var fs, ps []float64
	for b.Loop() {
		t0 := time.Now()
		for range block {
			floor()
		}
		t1 := time.Now()
		for range block {
			fp()
		}
		t2 := time.Now()
		fs = append(fs, float64(t1.Sub(t0))/block)
		ps = append(ps, float64(t2.Sub(t1))/block)
	}
	return median(fs), median(ps)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}
