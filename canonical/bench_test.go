package canonical

import (
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/capmesh/capmesh/internal/interleave"
)

// sampleDoc is a ~2 KB CHP-like evidence event: nested objects and arrays,
// unsorted keys, non-ASCII text, integers only (so every profile accepts it).
var sampleDoc = []byte(`{
  "event_type": "execution_completed", "event_id": "evt_8f14e45fceea167a5a36dedd4bea2543",
  "invocation_id": "inv_c9f0f895fb98ab9159f51fd0297e236d", "capability_id": "storage.artifact.store",
  "host_id": "nestgate-eastgate-01", "timestamp": "2026-07-01T12:00:00.123456Z", "outcome": "success",
  "sequence": 4711, "prev_hash": "9c0b8cf83a8638fe27a201fa291a7c0bf4f99b2b174fb60786362a865b5e4dd5",
  "correlation": {"trace_id": null, "correlation_id": "corr-2026-07-01-0001", "causation_id": "inv_a87ff679a2f3e71d9181a67b7542122c",
    "baggage": {"tenant": "acme", "région": "île-de-france", "priority": 3}},
  "actor": {"type": "agent", "id": "squirrel-7", "roles": ["planner", "executor"], "delegated_by": {"type": "user", "id": "zoë"}},
  "payload": {
    "artifact": {"name": "report-Q3.pdf", "size_bytes": 1048576, "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      "labels": {"confidential": true, "retention_days": 365, "owner": "ops&security <ops@example.org>"}},
    "steps": [
      {"name": "validate", "status": "ok", "duration_us": 1234, "checks": ["schema", "size", "mime"]},
      {"name": "encrypt", "status": "ok", "duration_us": 88123, "cipher": "chacha20-poly1305", "key_ref": "kms://vault/keys/artifact-7"},
      {"name": "replicate", "status": "ok", "duration_us": 412000, "targets": [
        {"node": "nestgate-westgate-02", "ack": true, "latency_us": 1800},
        {"node": "nestgate-southgate-03", "ack": true, "latency_us": 2450},
        {"node": "nestgate-northgate-04", "ack": false, "error": {"code": "timeout", "retryable": true}}]}
    ],
    "note": "café ☃ 🔒 — stored with 2 of 3 replicas; retry scheduled",
    "metrics": {"bytes_in": 1048576, "bytes_out": 1049600, "cpu_ms": 37, "rss_kb": 20480, "io_ops": 128}
  },
  "assurance": {"level": "S1", "evidence_policy": "local-append-only", "notes": []},
  "hash_scheme": "chp-event-hash-v2", "capability_version": "1.4.2", "redacted": false
}`)

// sampleFloatDoc is sampleDoc's shape with fractional numbers, for the
// profiles that write floats.
var sampleFloatDoc = []byte(`{"metrics": {"score": 0.875, "latency_ms": 12.5, "ratio": 1e-05, "big": 1.5e+300, "one": 1.0},
  "weights": [0.1, 0.2, 0.30000000000000004, 1e21, 123456.789], "name": "Zoë", "n": 42}`)

func benchDocs(b testing.TB) (Value, any) {
	v, err := Parse(sampleDoc)
	if err != nil {
		b.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(sampleDoc, &generic); err != nil {
		b.Fatal(err)
	}
	return v, generic
}

// BenchmarkFloor is the comparison point: encoding/json Marshal of the same
// document (as the map[string]any json.Unmarshal gives, so keys are sorted
// too) plus SHA-256.
func BenchmarkFloor(b *testing.B) {
	_, generic := benchDocs(b)
	b.SetBytes(int64(len(sampleDoc)))
	b.ReportAllocs()
	for b.Loop() {
		out, err := json.Marshal(generic)
		if err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(out)
	}
}

// BenchmarkCanonicalHash is canonicalize + SHA-256 of the parsed tree: the
// evidence hot path, where the event is already a Value.
func BenchmarkCanonicalHash(b *testing.B) {
	v, _ := benchDocs(b)
	for _, p := range []Profile{ChpStableV1, Genesis, JCS, ChpJcsV1} {
		b.Run(p.Name(), func(b *testing.B) {
			b.SetBytes(int64(len(sampleDoc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := HashValue(p, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseCanonicalHash starts from JSON text: Parse + canonicalize +
// SHA-256 (what verifying a received document costs).
func BenchmarkParseCanonicalHash(b *testing.B) {
	for _, p := range []Profile{ChpStableV1, Genesis, JCS, ChpJcsV1} {
		b.Run(p.Name(), func(b *testing.B) {
			b.SetBytes(int64(len(sampleDoc)))
			b.ReportAllocs()
			for b.Loop() {
				v, err := Parse(sampleDoc)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := SHA256(p, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGoCanonicalHash starts from the same Go value as the floor:
// FromGo + canonicalize + SHA-256.
func BenchmarkGoCanonicalHash(b *testing.B) {
	_, generic := benchDocs(b)
	for _, p := range []Profile{ChpStableV1, JCS} {
		b.Run(p.Name(), func(b *testing.B) {
			b.SetBytes(int64(len(sampleDoc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := SHA256(p, generic); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFloats measures the number paths (Python repr, ECMAScript).
func BenchmarkFloats(b *testing.B) {
	v, err := Parse(sampleFloatDoc)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []Profile{Genesis, JCS} {
		b.Run(p.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := HashValue(p, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	b.SetBytes(int64(len(sampleDoc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(sampleDoc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVsFloor runs the floor and a candidate alternately, in blocks
// of 16 calls each (see alternate), and reports the median per-call time
// of each (floor_ns, canon_ns) and their ratio (x_floor). On a shared,
// loaded machine the load then falls on both alike, and medians ignore
// the blocks a preemption landed in.
func BenchmarkVsFloor(b *testing.B) {
	v, generic := benchDocs(b)
	floor := func() {
		out, err := json.Marshal(generic)
		if err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(out)
	}
	for _, p := range []Profile{ChpStableV1, Genesis, JCS, ChpJcsV1} {
		for _, c := range []struct {
			name string
			run  func()
		}{
			{"value", func() { HashValue(p, v) }},
			{"text", func() {
				tv, err := Parse(sampleDoc)
				if err != nil {
					b.Fatal(err)
				}
				HashValue(p, tv)
			}},
			{"go", func() { SHA256(p, generic) }},
		} {
			b.Run(p.Name()+"/"+c.name, func(b *testing.B) {
				floorNs, candNs := interleave.Medians(b, floor, c.run)
				b.ReportMetric(floorNs, "floor_ns/op")
				b.ReportMetric(candNs, "canon_ns/op")
				b.ReportMetric(candNs/floorNs, "x_floor")
			})
		}
	}
}

// BenchmarkFromGo converts the sample document, as the map[string]any
// json.Unmarshal gives, to a tree: directly (FromGo), and through
// encoding/json and Parse (the alternative FromGo could have taken).
func BenchmarkFromGo(b *testing.B) {
	_, generic := benchDocs(b)
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := FromGo(generic); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal-parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			data, err := json.Marshal(generic)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Parse(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
