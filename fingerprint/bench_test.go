package fingerprint

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/govalue"
	"github.com/capmesh/capmesh/internal/interleave"
)

// benchObject is a ~2 KB nested object with unsorted ASCII and non-ASCII
// keys, index keys, numbers and strings (testdata/bench/object.json, which
// testdata/bench/node.mjs hashes too).
var benchObject = func() []byte {
	b, err := os.ReadFile("testdata/bench/object.json")
	if err != nil {
		panic(err)
	}
	return b
}()

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

// BenchmarkHashObject hashes the ~2 KB object from a parsed tree (the
// fingerprint), from JSON text (Parse + fingerprint) and from the Go value
// encoding/json decodes it to (FromGo + fingerprint), beside two floors:
// SHA-256 over the canonical bytes, and the writing floor (writeUnsorted
// and SHA-256).
func BenchmarkHashObject(b *testing.B) {
	v, err := canonical.Parse(benchObject)
	if err != nil {
		b.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(benchObject, &generic); err != nil {
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
	b.Run("fingerprint-from-text", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := canonical.Parse(benchObject)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := HashPlainObject(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fingerprint-from-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := govalue.FromGo(generic)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := HashPlainObject(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write-floor", func(b *testing.B) {
		buf := make([]byte, 0, 4096)
		b.ReportAllocs()
		for b.Loop() {
			_ = sha256.Sum256(writeUnsorted(buf[:0], &v))
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
		// key sorting, and hashed.
		{"object-write-floor", func() { sha256.Sum256(objBytes) }, func() {
			sha256.Sum256(writeUnsorted(jsonBuf[:0], &v))
		}},
		// The copying floor: the same tree in input order with every
		// string and number literal copied as it is, unchecked — what any
		// writer of this tree must at least do.
		{"object-copy-floor", func() { sha256.Sum256(objBytes) }, func() {
			sha256.Sum256(copyUnchecked(jsonBuf[:0], &v))
		}},
		// The fingerprint against the writing floor directly.
		{"object-vs-write-floor", func() { sha256.Sum256(writeUnsorted(jsonBuf[:0], &v)) }, func() { HashPlainObject(v) }},
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
			floor, fp := interleave.Medians(b, c.floor, c.fp)
			b.ReportMetric(floor, "floor_ns")
			b.ReportMetric(fp, "fp_ns")
			b.ReportMetric(fp/floor, "x_floor")
		})
	}
}

// writeUnsorted writes v as compact JSON in input order, with the string
// and number writers of the khoralabs profile but no key sorting: the
// least work that turns a tree into bytes, so the writing floor of
// HashPlainObject.
func writeUnsorted(b []byte, v *canonical.Value) []byte {
	switch v.Kind {
	case canonical.Null:
		return append(b, "null"...)
	case canonical.Bool:
		if v.Bool {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case canonical.Number:
		b, _ = canonical.AppendJSNumberLiteral(b, v.Str)
		return b
	case canonical.String:
		b, _ = canonical.AppendJSString(b, v.Str)
		return b
	case canonical.Array:
		b = append(b, '[')
		for i := range v.Arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = writeUnsorted(b, &v.Arr[i])
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i := range v.Obj {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = canonical.AppendJSString(b, v.Obj[i].Key)
		b = append(b, ':')
		b = writeUnsorted(b, &v.Obj[i].Value)
	}
	return append(b, '}')
}

// copyUnchecked writes v as compact JSON in input order, copying strings
// and number literals as they are without checking or converting them:
// the copying floor under writeUnsorted (which checks every string and
// converts every number as the khoralabs profile does). Its output is the
// canonical text only for trees that need neither.
func copyUnchecked(b []byte, v *canonical.Value) []byte {
	switch v.Kind {
	case canonical.Null:
		return append(b, "null"...)
	case canonical.Bool:
		if v.Bool {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case canonical.Number:
		return append(b, v.Str...)
	case canonical.String:
		b = append(b, '"')
		b = append(b, v.Str...)
		return append(b, '"')
	case canonical.Array:
		b = append(b, '[')
		for i := range v.Arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = copyUnchecked(b, &v.Arr[i])
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i := range v.Obj {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, v.Obj[i].Key...)
		b = append(b, '"', ':')
		b = copyUnchecked(b, &v.Obj[i].Value)
	}
	return append(b, '}')
}
