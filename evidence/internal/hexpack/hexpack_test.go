package hexpack

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func roundTrip(t testing.TB, src []byte) []byte {
	t.Helper()
	p := Append(nil, src)
	if len(p) > 2*len(src) {
		t.Fatalf("packed %d bytes into %d, over twice", len(src), len(p))
	}
	got, err := Unpack(nil, p, len(src))
	if err != nil {
		t.Fatalf("Unpack(Append(%q)): %v", src, err)
	}
	if !bytes.Equal(got, src) {
		t.Fatalf("round trip of %q gave %q", src, got)
	}
	return p
}

func TestRoundTripRuns(t *testing.T) {
	// Runs of every length up to 70, between every kind of neighbour.
	for _, left := range []string{"", "x", "\"", "\x01", "\x02", "\x00", "A", "g"} {
		for _, right := range []string{"", "y", "\"", "\x01", "\x02", "F", "-"} {
			for n := range 71 {
				run := strings.Repeat("0123456789abcdef", 5)[:n]
				roundTrip(t, []byte(left+run+right))
			}
		}
	}
}

func TestPacksLongRunsOnly(t *testing.T) {
	hash := "b98eab24137d6380517ef17efd6d1b9798cb4a612f30543779503eff8dfd890e"
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`{"content_hash":"` + hash + `"}`, len(`{"content_hash":""}`) + 1 + 1 + 32},
		{`"corr_ff2da8706dcb1aee6a6ee9e7a1a90d9c"`, len(`"corr_"`) + 1 + 1 + 16},
		{strings.Repeat("a", 17), 1 + 1 + 8 + 1}, // odd: the last digit stays
		{strings.Repeat("a", 15), 15},            // too short
		{"2026-11-27T07:50:34.502599Z", 27},
		{strings.ToUpper(hash), 64}, // uppercase is not packed
		{"\x01\x02", 4},
	} {
		if got := len(roundTrip(t, []byte(tc.in))); got != tc.want {
			t.Errorf("%q packs to %d bytes, want %d", tc.in, got, tc.want)
		}
	}
}

func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("0123456789abcdef\x00\x01\x02\x03\"xA")
	for range 20000 {
		b := make([]byte, r.IntN(200))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = byte(r.IntN(256))
			} else {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
		}
		roundTrip(t, b)
	}
}

func TestUnpackRefusesDamage(t *testing.T) {
	good := Append([]byte("head"), []byte(`"`+strings.Repeat("ab", 20)+`"`))
	for _, tc := range []struct {
		name  string
		in    []byte
		limit int
	}{
		{"escape at the end", []byte("abc\x02"), 100},
		{"run without length", []byte("\x01"), 100},
		{"run of zero bytes", []byte("\x01\x00"), 100},
		{"run shorter than MinRun", []byte("\x01\x01\xab"), 100},
		{"escape of a plain byte", []byte("\x02A"), 100},
		{"run longer than the stream", []byte("\x01\x05abcd"), 100},
		{"length overflow", []byte("\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), 100},
		{"over the limit by a run", good, len(good)},
		{"over the limit by plain bytes", []byte("abcdef"), 5},
		{"over the limit by an escape", []byte("abcde\x02\x01"), 5},
	} {
		if _, err := Unpack(nil, tc.in, tc.limit); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Unpack = %v, want ErrCorrupt", tc.name, err)
		}
	}
	if got, err := Unpack([]byte("x"), Append(nil, []byte("abcdef")), 6); err != nil || string(got) != "xabcdef" {
		t.Errorf("a limit is on what Unpack writes, not on dst: %q, %v", got, err)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(`{"h":"b98eab24137d6380517ef17efd6d1b9798cb4a612f30543779503eff8dfd890e"}`))
	f.Add([]byte("\x01\x02\x03 0123456789abcdef0"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p := roundTrip(t, src)
		if want := simpleAppend(nil, src); !bytes.Equal(p, want) {
			t.Fatalf("Append(%q) = %q, the simple packing %q", src, p, want)
		}
	})
}

func FuzzUnpack(f *testing.F) {
	f.Add(Append(nil, []byte(`"`+strings.Repeat("0f", 40)+`"`)), 100)
	f.Add([]byte("\x01\x80\x80\x01"), 1<<20)
	f.Add([]byte("\x02"), 10)
	f.Fuzz(func(t *testing.T, packed []byte, limit int) {
		limit = max(0, limit%(1<<16))
		out, err := Unpack(nil, packed, limit)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if len(out) > limit {
			t.Fatalf("wrote %d bytes, limit %d", len(out), limit)
		}
		// What unpacks packs to a stream that unpacks to the same bytes.
		again, err := Unpack(nil, Append(nil, out), len(out))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("repacking %q: %q, %v", out, again, err)
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	src := evidenceSample()
	dst := make([]byte, 0, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		dst = Append(dst[:0], src)
	}
}

func BenchmarkUnpack(b *testing.B) {
	src := evidenceSample()
	p := Append(nil, src)
	dst := make([]byte, 0, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		dst, _ = Unpack(dst[:0], p, len(src))
	}
}

// evidenceSample is five CHP-like events: structure, hashes and ids.
func evidenceSample() []byte {
	r := rand.New(rand.NewPCG(3, 4))
	hexOf := func(n int) string {
		const d = "0123456789abcdef"
		b := make([]byte, n)
		for i := range b {
			b[i] = d[r.IntN(16)]
		}
		return string(b)
	}
	var b strings.Builder
	for i := range 5 {
		b.WriteString(`{"assurance":{"evidence_policy":"local-append-only","level":"S1","notes":[]},"capability_id":"kv.get","content_hash":"` +
			hexOf(64) + `","correlation":{"correlation_id":"corr_` + hexOf(32) + `"},"event_id":"evt_` + hexOf(32) + `.cmb1.` + hexOf(64) +
			`","payload_commitment":"` + hexOf(64) + `","prev_hash":"` + hexOf(64) + `","sequence":` + string(rune('1'+i)) +
			`,"timestamp":"2026-11-27T07:50:34.502599Z"}`)
	}
	return []byte(b.String())
}

// simpleAppend is Append written the obvious way, one byte at a time: the
// oracle the skipping Append must match byte for byte.
func simpleAppend(dst, src []byte) []byte {
	isHex := func(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == codeRun || c == codeEscape:
			dst = append(dst, codeEscape, c)
			i++
		case isHex(c):
			j := i
			for j < len(src) && isHex(src[j]) {
				j++
			}
			if n := (j - i) &^ 1; n >= MinRun {
				dst = appendRun(dst, src[i:i+n])
				i += n
			}
			dst = append(dst, src[i:j]...)
			i = j
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

func TestAppendMatchesSimple(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := []byte("0123456789abcdef\x01\x02\"xg")
	for range 50000 {
		b := make([]byte, r.IntN(120))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
			if r.IntN(8) == 0 { // long runs are rare at random
				for j := i; j < len(b) && j < i+20+r.IntN(30); j++ {
					b[j] = alphabet[r.IntN(16)]
				}
			}
		}
		if got, want := Append(nil, b), simpleAppend(nil, b); !bytes.Equal(got, want) {
			t.Fatalf("Append(%q)\n = %q\nwant %q", b, got, want)
		}
	}
}

func BenchmarkAppendSimple(b *testing.B) {
	src := evidenceSample()
	dst := make([]byte, 0, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		dst = simpleAppend(dst[:0], src)
	}
}

// TestLinearTime: packing and unpacking 2 MiB full of escapes, with and
// without a run after them, end long before a generous deadline. Each
// code is searched for once, not once per escape: a search of the rest of
// the stream at every escape would read ~2^41 bytes here, minutes;
// the linear scan reads ~2^22, well under a second.
func TestLinearTime(t *testing.T) {
	// Streams with many of one code and none of the other after them: a
	// search for the missing code would read to the end at every step.
	for _, tail := range []string{"", `"` + strings.Repeat("ab", 16) + `"`, "\x01", "\x02"} {
		for _, unit := range [][]byte{{codeEscape, 'x'}, {codeRun, 'x'}} {
			src := append(bytes.Repeat(unit, 1<<20), tail...)
			roundTripBefore(t, src, 30*time.Second)
		}
	}
}

// roundTripBefore fails unless src packs and unpacks to itself before
// the deadline.
func roundTripBefore(t *testing.T, src []byte, deadline time.Duration) {
	t.Helper()
	{
		done := make(chan error, 1)
		go func() {
			got, err := Unpack(nil, Append(nil, src), len(src))
			if err == nil && !bytes.Equal(got, src) {
				err = errors.New("round trip changed the bytes")
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(deadline):
			t.Fatalf("%d bytes of %q… did not round-trip in %s: quadratic", len(src), src[:4], deadline)
		}
	}
}
