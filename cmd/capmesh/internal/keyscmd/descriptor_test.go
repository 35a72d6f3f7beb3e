package keyscmd

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// genDescriptor writes a random unsigned descriptor as JSON text: members
// in random order, node_public_key absent or null, strings with escapes
// and lone surrogates, metadata with exact number literals (integers past
// 2^64, decimals such as 1.0) written the way the genesis profile writes
// them, so the signed form must repeat them literally.
type genDescriptor struct{ r *rand.Rand }

func (g genDescriptor) str() string {
	parts := []string{"a", "Z", "9", " ", "-", ".", "é", "日本", "\\\"", "\\\\", "\\n", "\\u00e9", "\\ud800", "\\udfff", "\\ud83d\\ude00", "😀", "\\/"}
	var b strings.Builder
	b.WriteByte('"')
	for range g.r.IntN(8) {
		b.WriteString(parts[g.r.IntN(len(parts))])
	}
	b.WriteByte('"')
	return b.String()
}

func (g genDescriptor) number() string {
	switch g.r.IntN(5) {
	case 0:
		return strconv.Itoa(g.r.IntN(1000) - 500)
	case 1:
		// Past float64's exact integers and past uint64.
		return "1" + strconv.FormatUint(g.r.Uint64(), 10) + strconv.Itoa(g.r.IntN(10))
	case 2:
		return strconv.Itoa(g.r.IntN(100000)) + ".0"
	case 3:
		frac := strconv.Itoa(1 + g.r.IntN(999))
		frac = strings.TrimRight(strings.Repeat("0", g.r.IntN(2))+frac, "0")
		return strconv.Itoa(g.r.IntN(100000)) + "." + frac
	default:
		return "-" + strconv.Itoa(1+g.r.IntN(99999)) + "." + strconv.Itoa(1+g.r.IntN(9))
	}
}

func (g genDescriptor) value(depth int) string {
	n := 5
	if depth < 3 {
		n = 7
	}
	switch g.r.IntN(n) {
	case 0, 1:
		return g.number()
	case 2:
		return g.str()
	case 3:
		return []string{"true", "false", "null"}[g.r.IntN(3)]
	case 4:
		return g.number()
	case 5:
		var el []string
		for range g.r.IntN(4) {
			el = append(el, g.value(depth+1))
		}
		return "[" + strings.Join(el, ", ") + "]"
	default:
		return g.object(depth + 1)
	}
}

func (g genDescriptor) object(depth int) string {
	var mem []string
	seen := map[int]bool{}
	for range g.r.IntN(5) {
		k := g.r.IntN(20)
		if seen[k] {
			continue
		}
		seen[k] = true
		mem = append(mem, fmt.Sprintf(`"k%d": %s`, k, g.value(depth)))
	}
	return "{" + strings.Join(mem, ", ") + "}"
}

func (g genDescriptor) document() string {
	sec := g.r.IntN(3600)
	reg := fmt.Sprintf("2026-07-01T%02d:%02d:%02dZ", sec/3600, sec/60%60, sec%60)
	exp := fmt.Sprintf("2026-07-02T%02d:%02d:%02dZ", g.r.IntN(24), g.r.IntN(60), g.r.IntN(60))
	ep := []string{`"host": ` + g.str(), `"port": ` + strconv.Itoa(1+g.r.IntN(65535))}
	if g.r.IntN(2) == 0 {
		ep = append(ep, `"scheme": "`+[]string{"ws", "wss", "tcp", "http"}[g.r.IntN(4)]+`"`)
	}
	g.r.Shuffle(len(ep), func(i, j int) { ep[i], ep[j] = ep[j], ep[i] })
	var caps []string
	for range g.r.IntN(4) {
		caps = append(caps, g.str())
	}
	mem := []string{
		`"agent_id": ` + g.str(),
		`"network_name": ` + g.str(),
		`"endpoint": {` + strings.Join(ep, ", ") + `}`,
		`"registered_at": "` + reg + `"`,
		`"expires_at": "` + exp + `"`,
	}
	if g.r.IntN(4) > 0 {
		mem = append(mem, `"capabilities": [`+strings.Join(caps, ", ")+`]`)
	}
	if g.r.IntN(4) > 0 {
		mem = append(mem, `"metadata": `+g.object(0))
	}
	if g.r.IntN(4) == 0 {
		mem = append(mem, `"node_public_key": null`)
	}
	g.r.Shuffle(len(mem), func(i, j int) { mem[i], mem[j] = mem[j], mem[i] })
	return "{" + strings.Join(mem, ", ") + "}"
}

// sameValue reports whether a and b are the same JSON value with the same
// number literals, objects compared without regard to member order.
func sameValue(a, b canonical.Value) error {
	if a.Kind != b.Kind {
		return fmt.Errorf("%s became %s", a.Kind, b.Kind)
	}
	switch a.Kind {
	case canonical.Number, canonical.String:
		if a.Str != b.Str {
			return fmt.Errorf("%q became %q", a.Str, b.Str)
		}
	case canonical.Bool:
		if a.Bool != b.Bool {
			return fmt.Errorf("%v became %v", a.Bool, b.Bool)
		}
	case canonical.Array:
		if len(a.Arr) != len(b.Arr) {
			return fmt.Errorf("%d elements became %d", len(a.Arr), len(b.Arr))
		}
		for i := range a.Arr {
			if err := sameValue(a.Arr[i], b.Arr[i]); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case canonical.Object:
		if len(a.Obj) != len(b.Obj) {
			return fmt.Errorf("%d members became %d", len(a.Obj), len(b.Obj))
		}
		for _, m := range a.Obj {
			bv, ok := b.Get(m.Key)
			if !ok {
				return fmt.Errorf("member %q lost", m.Key)
			}
			if err := sameValue(m.Value, bv); err != nil {
				return fmt.Errorf(".%s: %w", m.Key, err)
			}
		}
	}
	return nil
}

// TestSignDescriptorFaithful is issue 14 #8: sign over many random
// descriptors without node_public_key, then every member of the signed
// document equals the input's, literal for literal (numbers "1.0" and
// 20-digit integers, lone surrogates), node_public_key is the signer's and
// the signature verifies.
func TestSignDescriptorFaithful(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	g := genDescriptor{rand.New(rand.NewPCG(14, 8))}
	changed := 0
	const runs = 1000
	for i := range runs {
		in := g.document()
		out, err := signDescriptor([]byte(in), priv)
		if err != nil {
			t.Fatalf("sign %s: %v", in, err)
		}
		d, err := descriptor.Parse(out)
		if err != nil || d.Verify() != nil || d.NodePublicKey != pub {
			t.Fatalf("signed document does not verify with the signer's key (%v):\n%s", err, out)
		}
		iv, err1 := canonical.Parse([]byte(in))
		ov, err2 := canonical.Parse(out)
		if err1 != nil || err2 != nil {
			t.Fatalf("reparse: %v %v", err1, err2)
		}
		docChanged := false
		for _, m := range iv.Obj {
			if m.Key == "node_public_key" {
				continue
			}
			got, _ := ov.Get(m.Key)
			want := m.Value
			if m.Key == "endpoint" {
				// The scheme default is filled in; everything given stays.
				want = want.Without()
				got = got.Without()
				if _, ok := want.Get("scheme"); !ok {
					got = got.Without("scheme")
				}
			}
			if err := sameValue(want, got); err != nil {
				docChanged = true
				if changed < 3 {
					t.Errorf("run %d: %s: %v\ninput  %s\nsigned %s", i, m.Key, err, in, out)
				}
			}
		}
		if docChanged {
			changed++
		}
	}
	if changed > 0 {
		t.Errorf("%d of %d signed documents changed a member", changed, runs)
	}
}

// TestSignDescriptorRefusals: what the byte-faithful path refuses, with
// the reference's codes.
func TestSignDescriptorRefusals(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	base := `"agent_id":"a","network_name":"n","registered_at":"2026-07-01T12:00:00Z","expires_at":"2026-07-01T13:00:00Z"`
	for _, tt := range []struct{ in, code, msg string }{
		{`{` + base + `,"endpoint":{"host":"h","port":8443.0}}`, descriptor.CodeInvalid, "endpoint.port must be an integer"},
		{`{` + base + `,"endpoint":{"host":"h","port":8443e0}}`, descriptor.CodeInvalid, "endpoint.port must be an integer"},
		{`{` + base + `,"endpoint":{"host":"h","port":"8443"}}`, descriptor.CodeInvalid, "endpoint.port must be an integer"},
		{`{` + base + `,"endpoint":{"host":"h","port":1},"node_public_key":7}`, descriptor.CodeInvalid, "node_public_key must be a string"},
		{`{` + base + `,"agent_id":"b","endpoint":{"host":"h","port":1}}`, descriptor.CodeInvalidJSON, "duplicate key"},
		{`[1]`, descriptor.CodeInvalidJSONObject, "must be a JSON object"},
		{`{"a":1`, descriptor.CodeInvalidJSON, "not valid JSON"},
	} {
		_, err := signDescriptor([]byte(tt.in), priv)
		var de *descriptor.Error
		if !errors.As(err, &de) || de.Code != tt.code || !strings.Contains(de.Message, tt.msg) {
			t.Errorf("sign %s: got %v, want %s containing %q", tt.in, err, tt.code, tt.msg)
		}
	}
}

// TestLoadSigningKey is issue 21 #8: descriptor sign --key reads the PEM
// key 'capmesh keys' writes and the seed 'keys export --seed' prints, as
// well as the older seed formats, and refuses a key file others can read.
func TestLoadSigningKey(t *testing.T) {
	dir := t.TempDir()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	pemPath := filepath.Join(dir, "identity.pem")
	if err := k.Save(pemPath); err != nil {
		t.Fatal(err)
	}
	seed := k.Ed25519().Seed()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := append([]byte{}, k.Ed25519()...)
	for _, p := range []string{
		pemPath,
		write("seed.b64", []byte(base64.StdEncoding.EncodeToString(seed)+"\n"), 0o600),
		write("seed.hex", []byte(hex.EncodeToString(seed)+"\n"), 0o600),
		write("seed.raw", seed, 0o600),
		write("key64.b64", []byte(base64.StdEncoding.EncodeToString(full)), 0o600),
	} {
		got, err := loadSigningKey(p)
		if err != nil || !got.Equal(k.Ed25519()) {
			t.Errorf("%s: %v (key equal: %v)", filepath.Base(p), err, err == nil && got.Equal(k.Ed25519()))
		}
	}
	bad := append([]byte{}, full...)
	bad[40] ^= 1
	for _, tt := range []struct{ path, msg string }{
		{write("open.hex", []byte(hex.EncodeToString(seed)), 0o644), "chmod 600"},
		{write("mismatch.b64", []byte(base64.StdEncoding.EncodeToString(bad)), 0o600), "does not match its seed"},
		{write("junk", []byte("hello"), 0o600), "not a key"},
		{write("rsa.pem", []byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"), 0o600), "not a PKCS#8"},
	} {
		if _, err := loadSigningKey(tt.path); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v, want an error containing %q", filepath.Base(tt.path), err, tt.msg)
		}
	}
}
