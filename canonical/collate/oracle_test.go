package collate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fidelity corpus: answers Node.js v20.20.2 gave for the comparisons in
// testdata/oracle, regenerated with
//
//	go test ./canonical/collate -run TestRegenerateOracle -regen-oracle
//
// (needs node on PATH). Plain `go test` replays it without Node.

var regenOracle = flag.Bool("regen-oracle", false, "ask node for the collation fidelity corpus and rewrite testdata/oracle")

const (
	pairsFile      = "testdata/oracle/pairs.txt.gz"
	codePointsFile = "testdata/oracle/codepoints.json"
	chunkSize      = 4096
)

// units encodes a WTF-8 string as UTF-16 code units in hex, 4 digits each.
func units(s string) string {
	var b strings.Builder
	for _, r := range decodeWTF8(nil, s) {
		if r >= 0x10000 {
			r -= 0x10000
			fmt.Fprintf(&b, "%04x%04x", 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		} else {
			fmt.Fprintf(&b, "%04x", r)
		}
	}
	return b.String()
}

// fromUnits decodes units back to a WTF-8 string (lone surrogates as 3-byte
// sequences).
func fromUnits(h string) (string, error) {
	var u []uint16
	for i := 0; i+4 <= len(h); i += 4 {
		v, err := strconv.ParseUint(h[i:i+4], 16, 16)
		if err != nil {
			return "", err
		}
		u = append(u, uint16(v))
	}
	var b []byte
	for i := 0; i < len(u); i++ {
		r := rune(u[i])
		if r >= 0xd800 && r < 0xdc00 && i+1 < len(u) && u[i+1] >= 0xdc00 && u[i+1] <= 0xdfff {
			r = 0x10000 + (r-0xd800)<<10 + rune(u[i+1]-0xdc00)
			i++
		}
		b = appendWTF8(b, r)
	}
	return string(b), nil
}

func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xd800 && r <= 0xdfff {
		return append(b, 0xed, byte(0x80|(r>>6)&0x3f), byte(0x80|r&0x3f))
	}
	return utf8.AppendRune(b, r)
}

// cpString is code point c as a one-code-point string (WTF-8 for surrogates).
func cpString(c rune) string { return string(appendWTF8(nil, c)) }

// pools of code points that exercise different parts of the collation data.
var pools = [][2]rune{
	{0x20, 0x7e}, {0x00, 0x1f}, {0x7f, 0xff}, {0x100, 0x24f}, {0x250, 0x2ff},
	{0x300, 0x36f}, {0x1ab0, 0x1aff}, {0x1dc0, 0x1dff}, {0x20d0, 0x20ff}, {0xfe20, 0xfe2f},
	{0x370, 0x3ff}, {0x400, 0x52f}, {0x530, 0x58f}, {0x590, 0x5ff}, {0x600, 0x6ff},
	{0x900, 0x97f}, {0x980, 0x9ff}, {0xb80, 0xbff}, {0xc80, 0xcff}, {0xd00, 0xd7f},
	{0xd80, 0xdff}, {0xe00, 0xe7f}, {0xe80, 0xeff}, {0xf00, 0xfff}, {0x1000, 0x109f},
	{0x1100, 0x11ff}, {0xa960, 0xa97f}, {0xd7b0, 0xd7ff}, {0xac00, 0xd7a3}, {0x3130, 0x318f},
	{0x1780, 0x17ff}, {0x1980, 0x19df}, {0x1a20, 0x1aaf}, {0x1b00, 0x1b7f}, {0xaa80, 0xaadf},
	{0x2000, 0x206f}, {0x20a0, 0x20cf}, {0x2100, 0x214f}, {0x2190, 0x23ff}, {0x2460, 0x24ff},
	{0x2500, 0x27bf}, {0x2e80, 0x2fdf}, {0x3000, 0x30ff}, {0x3200, 0x33ff}, {0x3400, 0x4dbf},
	{0x4e00, 0x9fff}, {0xf900, 0xfaff}, {0xfb00, 0xfdff}, {0xfe00, 0xfe0f}, {0xfe30, 0xfeff},
	{0xff00, 0xffef}, {0xfff0, 0xffff}, {0xd800, 0xdfff}, {0x10000, 0x100ff}, {0x10d40, 0x10d8f},
	{0x11380, 0x113ff}, {0x11f00, 0x11f5f}, {0x16d40, 0x16d7f}, {0x16fe0, 0x16fff}, {0x17000, 0x187ff},
	{0x18800, 0x18cff}, {0x18d00, 0x18d7f}, {0x1b000, 0x1b2ff}, {0x1cc00, 0x1ceff}, {0x1d400, 0x1d7ff},
	{0x1e030, 0x1e08f}, {0x1e4d0, 0x1e4ff}, {0x1e900, 0x1e95f}, {0x1f000, 0x1f0ff}, {0x1f100, 0x1f1ff},
	{0x1f300, 0x1f5ff}, {0x1f600, 0x1f64f}, {0x1f900, 0x1faff}, {0x1f3fb, 0x1f3ff}, {0x20000, 0x2a6df},
	{0x2a700, 0x2ee5d}, {0x30000, 0x323af}, {0x323b0, 0x3347f}, {0x2f800, 0x2fa1f}, {0xe0000, 0xe01ef},
	{0xf0000, 0xf00ff}, {0x10fff0, 0x10ffff}, {0x40000, 0x4ffff},
}

// special single code points mixed into every pool.
var specials = []rune{0x200d, 0xfe0f, 0xfe0e, 0x00ad, 0x034f, 0x0001, 0xfffd, 0xfffe, 0x0300, 0x0301, 0x0308, 0x0323, 0x0327, 0x0345, 0x0334, 0x05b0, 0x0e40, 0x0e01, 0x0f71, 0x0f72, 0x0f80, 0x0fb2, 0x0f73, 0x0f75, 0x0f81, 0x302a, 0x3099, 0x309a, 0x30fc, 0x0020, 0x0009, 0x2028}

func randString(r *rand.Rand, contractions []string) string {
	n := 1 + r.IntN(5)
	var b []byte
	p1, p2 := pools[r.IntN(len(pools))], pools[r.IntN(len(pools))]
	for range n {
		switch k := r.IntN(10); {
		case k < 4:
			b = appendWTF8(b, p1[0]+rune(r.IntN(int(p1[1]-p1[0]+1))))
		case k < 6:
			b = appendWTF8(b, p2[0]+rune(r.IntN(int(p2[1]-p2[0]+1))))
		case k < 8:
			b = appendWTF8(b, specials[r.IntN(len(specials))])
		default:
			if len(contractions) > 0 {
				b = append(b, contractions[r.IntN(len(contractions))]...)
			} else {
				b = append(b, 'a')
			}
		}
	}
	return string(b)
}

// mutate returns a string close to s, to probe secondary and tertiary
// differences and discontiguous contractions.
func mutate(r *rand.Rand, s string) string {
	rs := decodeWTF8(nil, s)
	switch r.IntN(5) {
	case 0: // insert a combining mark or special
		i := r.IntN(len(rs) + 1)
		rs = slices.Insert(rs, i, specials[r.IntN(len(specials))])
	case 1: // swap two neighbours
		if len(rs) > 1 {
			i := r.IntN(len(rs) - 1)
			rs[i], rs[i+1] = rs[i+1], rs[i]
		}
	case 2: // drop one
		if len(rs) > 1 {
			i := r.IntN(len(rs))
			rs = slices.Delete(rs, i, i+1)
		}
	case 3: // change case of ASCII letters
		for i, c := range rs {
			if c >= 'a' && c <= 'z' {
				rs[i] = c - 32
			} else if c >= 'A' && c <= 'Z' {
				rs[i] = c + 32
			}
		}
	default: // append a mark from the combining pool
		rs = append(rs, 0x300+rune(r.IntN(0x70)))
	}
	var b []byte
	for _, c := range rs {
		b = appendWTF8(b, c)
	}
	return string(b)
}

// contextStrings lists every contraction and prefix string in the root
// data, as strings of code points.
func contextStrings(t testing.TB) []string {
	c := root()
	var out []string
	seen := map[uint32]bool{}
	for cp := rune(0); cp <= 0x10ffff; cp++ {
		if cp >= 0xd800 && cp <= 0xdfff {
			continue
		}
		ce32 := c.d.trie.get(cp)
		if !isSpecialCE32(ce32) || (tagOf(ce32) != contractionTag && tagOf(ce32) != prefixTag) {
			continue
		}
		tag := tagOf(ce32)
		walkContexts(c.d, ce32, seen, func(suffix []uint16) {
			s := string(utf16Runes(suffix))
			if tag == prefixTag {
				rs := []rune(s)
				slices.Reverse(rs)
				out = append(out, string(rs)+string(cp))
			} else {
				out = append(out, string(cp)+s)
			}
		})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func utf16Runes(u []uint16) []rune {
	var rs []rune
	for i := 0; i < len(u); i++ {
		r := rune(u[i])
		if r >= 0xd800 && r < 0xdc00 && i+1 < len(u) {
			r = 0x10000 + (r-0xd800)<<10 + rune(u[i+1]-0xdc00)
			i++
		}
		rs = append(rs, r)
	}
	return rs
}

// walkContexts enumerates the strings of the context trie of ce32.
func walkContexts(d *icuData, ce32 uint32, seen map[uint32]bool, fn func([]uint16)) {
	if seen[ce32] {
		return
	}
	seen[ce32] = true
	t := newUCharsTrie(d.contexts[indexOf(ce32)+2:])
	var walk func(pos int, prefix []uint16)
	var walkBranch func(pos, length int, prefix []uint16)
	walk = func(pos int, prefix []uint16) {
		node := t.at(pos)
		pos++
		for {
			if node >= ucMinValueLead {
				fn(prefix)
				if node&ucValueIsFinal != 0 {
					return
				}
				pos = skipNodeValue(pos, node)
				node &= ucNodeTypeMask
			}
			if node < ucMinLinearMatch {
				if node == 0 {
					node = t.at(pos)
					pos++
				}
				walkBranch(pos, node+1, prefix)
				return
			}
			n := node - ucMinLinearMatch + 1
			prefix = append(slices.Clip(prefix), t.u[pos:pos+n]...)
			pos += n
			node = t.at(pos)
			pos++
		}
	}
	walkBranch = func(pos, length int, prefix []uint16) {
		for length > ucMaxBranchLinear {
			walkBranch(t.jumpByDelta(pos+1), length>>1, prefix)
			length -= length >> 1
			pos = t.skipDelta(pos + 1)
		}
		for ; length > 1; length-- {
			unit := t.u[pos]
			pos++
			node := t.at(pos)
			p := append(slices.Clip(prefix), unit)
			if node&ucValueIsFinal != 0 {
				fn(p)
				pos = skipValueLead(pos+1, node&0x7fff)
				continue
			}
			pos++
			var delta int
			switch {
			case node < ucMinTwoUnitValue:
				delta = node
			case node < ucThreeUnitValue:
				delta = (node-ucMinTwoUnitValue)<<16 | t.at(pos)
				pos++
			default:
				delta = t.at(pos)<<16 | t.at(pos+1)
				pos += 2
			}
			walk(pos+delta, p)
		}
		walk(pos+1, append(slices.Clip(prefix), t.u[pos]))
	}
	walk(0, nil)
}

// corpusPairs builds the comparison pairs of the corpus, deterministically.
func corpusPairs(t testing.TB) [][2]string {
	r := rand.New(rand.NewPCG(17, 20))
	ctx := contextStrings(t)
	var pairs [][2]string
	add := func(a, b string) { pairs = append(pairs, [2]string{a, b}) }
	// Every context string against its neighbours and close variants.
	for i, s := range ctx {
		add(s, ctx[(i+1)%len(ctx)])
		rs := []rune(s)
		add(s, string(rs[:len(rs)-1]))
		add(s, string(rs[0])+"\u0323"+string(rs[1:]))
		add(s, s+"\u0301")
		add(mutate(r, s), s)
		add(s+"a", string(rs[0])+"b")
	}
	// Discontiguous contractions: put marks of lower, equal and higher
	// combining class between a contraction and its trailing non-starter.
	nf := root().nf
	var marks []rune
	for m := rune(0x300); m < 0x370; m++ {
		if nf.ccc(m) != 0 {
			marks = append(marks, m)
		}
	}
	marks = append(marks, 0x05b0, 0x0f71, 0x0f72, 0x0f74, 0x0f80, 0x093c, 0x094d, 0x0e38, 0x0e48, 0x302a, 0x3099, 0x1dce, 0x20d2, 0x0345, 0x0334)
	for _, s := range ctx {
		rs := []rune(s)
		last := rs[len(rs)-1]
		if len(rs) < 2 || nf.ccc(last) == 0 {
			continue
		}
		head := string(rs[:len(rs)-1])
		for range 4 {
			m := marks[r.IntN(len(marks))]
			m2 := marks[r.IntN(len(marks))]
			add(head+string(m)+string(last), head+string(last)+string(m))
			add(head+string(m)+string(last), head+string(m))
			add(head+string(m)+string(m2)+string(last), s+string(m)+string(m2))
			add(head+string(m)+string(last)+"b", head+"b")
		}
	}
	for range 15000 {
		a := randString(r, ctx)
		if r.IntN(3) == 0 {
			add(a, mutate(r, a))
		} else {
			add(a, randString(r, ctx))
		}
	}
	return pairs
}

type oracleAnswer struct {
	Versions map[string]string `json:"versions"`
	Locale   string            `json:"locale"`
	Pairs    []int             `json:"pairs"`
	Chunks   []string          `json:"chunks"`
}

func askNode(t *testing.T, req any) oracleAnswer {
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "internal/gen/oracle.mjs")
	cmd.Stdin = bytes.NewReader(body)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node oracle.mjs: %v", err)
	}
	var ans oracleAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatal(err)
	}
	if ans.Versions["icu"] != "78.2" {
		t.Fatalf("node has ICU %s, want 78.2 (Node.js v20.20.2)", ans.Versions["icu"])
	}
	return ans
}

func TestRegenerateOracle(t *testing.T) {
	if !*regenOracle {
		t.Skip("run with -regen-oracle to rewrite the corpus from node")
	}
	pairs := corpusPairs(t)
	req := struct {
		Pairs [][2]string `json:"pairs"`
	}{}
	for _, p := range pairs {
		req.Pairs = append(req.Pairs, [2]string{units(p[0]), units(p[1])})
	}
	ans := askNode(t, req)
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	fmt.Fprintf(zw, "# Node.js %s ICU %s: a b sign(a.localeCompare(b)), strings as UTF-16 hex\n", ans.Versions["node"], ans.Versions["icu"])
	for i, p := range req.Pairs {
		fmt.Fprintf(zw, "%s %s %d\n", p[0], p[1], ans.Pairs[i])
	}
	zw.Close()
	if err := os.MkdirAll(filepath.Dir(pairsFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pairsFile, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cp := askNode(t, struct {
		AllCodePoints bool `json:"allCodePoints"`
		ChunkSize     int  `json:"chunkSize"`
	}{true, chunkSize})
	b, _ := json.MarshalIndent(struct {
		Node      string   `json:"node"`
		ICU       string   `json:"icu"`
		ChunkSize int      `json:"chunkSize"`
		Chunks    []string `json:"chunks"`
	}{cp.Versions["node"], cp.Versions["icu"], chunkSize, cp.Chunks}, "", " ")
	if err := os.WriteFile(codePointsFile, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readPairs(t testing.TB) (as, bs []string, want []int) {
	f, err := os.Open(pairsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("bad corpus line %q", line)
		}
		a, err1 := fromUnits(f[0])
		b, err2 := fromUnits(f[1])
		w, err3 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("bad corpus line %q", line)
		}
		as, bs, want = append(as, a), append(bs, b), append(want, w)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return as, bs, want
}

// TestNodeFidelityPairs replays every comparison of the corpus: random
// strings over many scripts, emoji, lone surrogates, unassigned code points,
// and every contraction and prefix of the root data with close variants.
func TestNodeFidelityPairs(t *testing.T) {
	as, bs, want := readPairs(t)
	if len(want) < 10000 {
		t.Fatalf("corpus has only %d pairs", len(want))
	}
	bad := 0
	for i := range want {
		got := Compare(as[i], bs[i])
		back := Compare(bs[i], as[i])
		if got != want[i] || back != -want[i] {
			bad++
			if bad <= 20 {
				t.Errorf("Compare(%+q, %+q) = %d (reverse %d), node says %d", as[i], bs[i], got, back, want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d comparisons differ from node", bad, len(want))
	}
}

// TestNodeFidelityAllCodePoints sorts every code point U+0000..U+10FFFF
// (surrogates as lone code units) stably and checks the order and the ties
// against node's, chunk by chunk.
func TestNodeFidelityAllCodePoints(t *testing.T) {
	if testing.Short() {
		t.Skip("sorts 1.1M strings")
	}
	b, err := os.ReadFile(codePointsFile)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		ChunkSize int      `json:"chunkSize"`
		Chunks    []string `json:"chunks"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	c := root()
	type entry struct {
		cp  rune
		ces []uint64
	}
	all := make([]entry, 0x110000)
	var runes []rune
	for cp := range rune(0x110000) {
		ces, _ := c.appendCEs(nil, nil, &runes, cpString(cp))
		all[cp] = entry{cp, ces}
	}
	slices.SortFunc(all, func(x, y entry) int {
		if r := compareCEs(x.ces, y.ces); r != 0 {
			return r
		}
		return int(x.cp - y.cp)
	})
	bad := 0
	for k, n := 0, 0; k < len(all); k, n = k+want.ChunkSize, n+1 {
		h := sha256.New()
		for i := k; i < min(k+want.ChunkSize, len(all)); i++ {
			tie := 0
			if i > 0 && compareCEs(all[i-1].ces, all[i].ces) == 0 {
				tie = 1
			}
			fmt.Fprintf(h, "%x,%d\n", all[i].cp, tie)
		}
		if got := hex.EncodeToString(h.Sum(nil)); n >= len(want.Chunks) || got != want.Chunks[n] {
			bad++
			if bad <= 5 {
				t.Errorf("chunk %d (sorted positions %d..%d, U+%04X..U+%04X) differs from node", n, k, k+want.ChunkSize-1, all[k].cp, all[min(k+want.ChunkSize, len(all))-1].cp)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d chunks differ", bad, len(want.Chunks))
	}
}
