package descriptor_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"

	"github.com/capmesh/capmesh/internal/specdata"
)

// samplesDir holds the Genesis-Mesh reference samples (copied into
// internal/specdata).
var samplesDir = specdata.Path("genesis-mesh/samples")

type sample struct {
	NodeKey struct {
		SeedHex      string `json:"seed_hex"`
		PublicKeyB64 string `json:"public_key_b64"`
	} `json:"node_key"`
	VerifyAt      string          `json:"verify_at"`
	Descriptor    json.RawMessage `json:"descriptor"`
	CanonicalJSON string          `json:"canonical_json"`
}

func loadSamples(t testing.TB) map[string]sample {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(samplesDir, "descriptor-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in %s (err %v)", samplesDir, err)
	}
	out := map[string]sample{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s sample
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = s
	}
	return out
}

func TestReferenceSamplesVerify(t *testing.T) {
	for name, s := range loadSamples(t) {
		t.Run(name, func(t *testing.T) {
			d, err := descriptor.Parse(s.Descriptor)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(s.CanonicalJSON, string(d.CanonicalBytes())); diff != "" {
				t.Errorf("canonical bytes differ (-reference +ours):\n%s", diff)
			}
			if err := d.Verify(); err != nil {
				t.Errorf("Verify: %v", err)
			}
			at, err := time.Parse(time.RFC3339, s.VerifyAt)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Live(at, descriptor.DefaultSkew); err != nil {
				t.Errorf("Live(%s): %v", s.VerifyAt, err)
			}
			// Re-signing with the sample's seed reproduces the reference
			// signature byte for byte (Ed25519 is deterministic).
			seed, _ := hex.DecodeString(s.NodeKey.SeedHex)
			want := d.Signatures[0].Sig
			if err := d.Sign(ed25519.NewKeyFromSeed(seed)); err != nil {
				t.Fatal(err)
			}
			if d.Signatures[0].Sig != want {
				t.Errorf("our signature %s, reference %s", d.Signatures[0].Sig, want)
			}
			// The normalized wire form parses back to the same canonical bytes.
			wire, err := d.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			d2, err := descriptor.Parse(wire)
			if err != nil {
				t.Fatalf("re-Parse: %v", err)
			}
			if string(d2.CanonicalBytes()) != s.CanonicalJSON {
				t.Errorf("round trip changed canonical bytes")
			}
		})
	}
}

// mutate parses sample 01's wire JSON as a generic map, applies f, and
// returns the new JSON.
func mutate(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	s := loadSamples(t)["descriptor-01-basic-wss.json"]
	var m map[string]any
	if err := json.Unmarshal(s.Descriptor, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func code(err error) string {
	var e *descriptor.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return "not *descriptor.Error: " + err.Error()
}

// smallOrderKey is the identity point: with it, R=identity, S=0 verifies
// for every message under crypto/ed25519 alone.
const smallOrderKey = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

func TestRefusals(t *testing.T) {
	at := time.Date(2026, 7, 1, 12, 5, 0, 0, time.UTC)
	identitySig := base64.StdEncoding.EncodeToString(append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...))
	tests := []struct {
		name      string
		body      []byte
		parseCode string // refusal at Parse
		sigCode   string // refusal at Verify
		liveCode  string // refusal at Live(at)
	}{
		{name: "not json", body: []byte(`{"agent_id":`), parseCode: descriptor.CodeInvalidJSON},
		{name: "array", body: []byte(`[]`), parseCode: descriptor.CodeInvalidJSONObject},
		{name: "missing agent_id", body: mutate(t, func(m map[string]any) { delete(m, "agent_id") }), parseCode: descriptor.CodeInvalid},
		{name: "port as string", body: mutate(t, func(m map[string]any) { m["endpoint"].(map[string]any)["port"] = "8443" }), parseCode: descriptor.CodeInvalid},
		{name: "port as float", body: []byte(strings.Replace(string(mutate(t, func(map[string]any) {})), `"port":8443`, `"port":8443.0`, 1)), parseCode: descriptor.CodeInvalid},
		{name: "port 0", body: mutate(t, func(m map[string]any) { m["endpoint"].(map[string]any)["port"] = 0 }), parseCode: descriptor.CodeInvalid},
		{name: "port 65536", body: mutate(t, func(m map[string]any) { m["endpoint"].(map[string]any)["port"] = 65536 }), parseCode: descriptor.CodeInvalid},
		{name: "naive timestamp", body: mutate(t, func(m map[string]any) { m["registered_at"] = "2026-07-01T12:00:00" }), parseCode: descriptor.CodeInvalid},
		{name: "epoch timestamp", body: mutate(t, func(m map[string]any) { m["registered_at"] = 1782907200 }), parseCode: descriptor.CodeInvalid},
		{name: "window inverted", body: mutate(t, func(m map[string]any) { m["expires_at"] = m["registered_at"] }), parseCode: descriptor.CodeInvalid},
		{name: "metadata not object", body: mutate(t, func(m map[string]any) { m["metadata"] = []any{} }), parseCode: descriptor.CodeInvalid},
		{name: "signature member", body: mutate(t, func(m map[string]any) {
			s := m["signatures"].([]any)[0].(map[string]any)
			s["signature"] = s["sig"]
			delete(s, "sig")
		}), parseCode: descriptor.CodeInvalid},
		{name: "unsigned", body: mutate(t, func(m map[string]any) { m["signatures"] = []any{} }), sigCode: descriptor.CodeSignatureRequired},
		{name: "tampered capability", body: mutate(t, func(m map[string]any) { m["capabilities"] = []any{"llm:chat", "admin"} }), sigCode: descriptor.CodeInvalidSignature},
		{name: "tampered metadata", body: mutate(t, func(m map[string]any) { m["metadata"] = map[string]any{"model": "other"} }), sigCode: descriptor.CodeInvalidSignature},
		{name: "sig with whitespace", body: mutate(t, func(m map[string]any) {
			s := m["signatures"].([]any)[0].(map[string]any)
			s["sig"] = " " + s["sig"].(string)
		}), sigCode: descriptor.CodeInvalidSignature},
		{name: "sig unpadded", body: mutate(t, func(m map[string]any) {
			s := m["signatures"].([]any)[0].(map[string]any)
			s["sig"] = strings.TrimRight(s["sig"].(string), "=")
		}), sigCode: descriptor.CodeInvalidSignature},
		{name: "small-order key", body: mutate(t, func(m map[string]any) {
			m["node_public_key"] = smallOrderKey
			m["signatures"] = []any{map[string]any{"key_id": smallOrderKey, "sig": identitySig}}
		}), sigCode: descriptor.CodeInvalidSignature},
		{name: "first signature counts", body: mutate(t, func(m map[string]any) {
			good := m["signatures"].([]any)[0]
			m["signatures"] = []any{map[string]any{"key_id": "x", "sig": identitySig}, good}
		}), sigCode: descriptor.CodeInvalidSignature},
		{name: "unknown member added after signing", body: mutate(t, func(m map[string]any) { m["extra"] = true; m["endpoint"].(map[string]any)["tls"] = 1 })},
		{name: "expired", body: mutate(t, func(map[string]any) {}), liveCode: descriptor.CodeExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := descriptor.Parse(tt.body)
			if got := code(err); got != tt.parseCode {
				t.Fatalf("Parse code %q, want %q (err %v)", got, tt.parseCode, err)
			}
			if err != nil {
				return
			}
			if got := code(d.Verify()); got != tt.sigCode {
				t.Fatalf("Verify code %q, want %q", got, tt.sigCode)
			}
			now := at
			if tt.liveCode == descriptor.CodeExpired {
				now = at.Add(time.Hour)
			}
			if got := code(d.Live(now, descriptor.DefaultSkew)); got != tt.liveCode {
				t.Fatalf("Live code %q, want %q", got, tt.liveCode)
			}
		})
	}
}

func TestLiveWindow(t *testing.T) {
	reg := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	_, priv, _ := ed25519.GenerateKey(nil)
	d := descriptor.New("a", "NET", priv.Public().(ed25519.PublicKey), nil, descriptor.Endpoint{Host: "h", Port: 1}, reg, 10*time.Minute)
	tests := []struct {
		now  time.Time
		want string
	}{
		{reg.Add(-5 * time.Minute), ""},
		{reg.Add(-5*time.Minute - time.Second), descriptor.CodeNotYetValid},
		{reg.Add(10*time.Minute - time.Microsecond), ""},
		{reg.Add(10 * time.Minute), descriptor.CodeExpired},
	}
	for _, tt := range tests {
		if got := code(d.Live(tt.now, descriptor.DefaultSkew)); got != tt.want {
			t.Errorf("Live(%s) = %q, want %q", tt.now, got, tt.want)
		}
	}
}

func TestTimeRendering(t *testing.T) {
	tests := []struct{ in, out, iso string }{
		{"2026-07-01T14:00:00.25+02:00", "2026-07-01T14:00:00.250000+02:00", "2026-07-01T14:00:00.250000+02:00"},
		{"2026-07-01T12:30:00.000Z", "2026-07-01T12:30:00Z", "2026-07-01T12:30:00+00:00"},
		{"2026-07-01T12:30:00+00:00", "2026-07-01T12:30:00Z", "2026-07-01T12:30:00+00:00"},
		{"2026-07-01T12:30:00.123456789z", "2026-07-01T12:30:00.123456Z", "2026-07-01T12:30:00.123456+00:00"},
		{"2026-07-01t12:30:00-05:30", "2026-07-01T12:30:00-05:30", "2026-07-01T12:30:00-05:30"},
	}
	for _, tt := range tests {
		v, err := descriptor.ParseTime(tt.in)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", tt.in, err)
			continue
		}
		if v.String() != tt.out || v.IsoFormat() != tt.iso {
			t.Errorf("ParseTime(%q) renders %q / %q, want %q / %q", tt.in, v, v.IsoFormat(), tt.out, tt.iso)
		}
	}
	for _, bad := range []string{"2026-07-01T12:30:00", "2026-07-01 12:30:00Z", "2026-07-01T12:30Z", "2026-07-01T12:30:00+0000", "2026-02-30T00:00:00Z", "2026-07-01T12:30:00.Z", "0000-01-01T00:00:00Z"} {
		if _, err := descriptor.ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) accepted", bad)
		}
	}
	if _, err := descriptor.ParseTime("2026-07-01T12:30:00"); !errors.Is(err, descriptor.ErrNaiveTimestamp) {
		t.Errorf("naive timestamp error %v does not wrap ErrNaiveTimestamp", err)
	}
}

func TestSignRejectsForeignKey(t *testing.T) {
	_, a, _ := ed25519.GenerateKey(nil)
	_, b, _ := ed25519.GenerateKey(nil)
	d := descriptor.New("x", "N", a.Public().(ed25519.PublicKey), []string{"c"}, descriptor.Endpoint{Host: "h", Port: 2, Scheme: "tcp"}, time.Now(), time.Minute)
	if err := d.Sign(b); err == nil {
		t.Fatal("Sign with a key that is not node_public_key succeeded")
	}
	if err := d.Sign(a); err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestDecodePublicKeyNonCanonical(t *testing.T) {
	// y = p (2^255-19) encodes 0 non-canonically.
	p := make([]byte, 32)
	p[0] = 0xed
	for i := 1; i < 31; i++ {
		p[i] = 0xff
	}
	p[31] = 0x7f
	if _, err := descriptor.DecodePublicKey(base64.StdEncoding.EncodeToString(p)); err == nil {
		t.Error("non-canonical encoding accepted")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range loadSamples(f) {
		f.Add([]byte(s.Descriptor))
	}
	f.Add([]byte(`{"agent_id":"a","node_public_key":"k","network_name":"n","endpoint":{"host":"h","port":1},"registered_at":"2026-07-01T12:00:00Z","expires_at":"2026-07-01T12:00:01Z"}`))
	f.Add([]byte(`{"agent_id":"a","agent_id":"b","node_public_key":"k","network_name":"n","endpoint":{"host":"h","port":1},"registered_at":"2026-07-01T12:00:00Z","expires_at":"2026-07-01T12:00:01Z"}`))
	f.Add([]byte(`{"agent_id":"a","node_public_key":"k","network_name":"n","endpoint":{"host":"h","port":1,"scheme":"tcp"},"metadata":{"x":[1,{"y":"}"}],"z":"\"}"},"registered_at":"2026-07-01T12:00:00Z","expires_at":"2026-07-01T12:00:01Z","signatures":[{"key_id":"k","sig":"s"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The one-pass parser, when it accepts, agrees with the generic one.
		if fd, ok := descriptor.FastParse(data); ok {
			gd, err := descriptor.ParseGeneric(data)
			if err != nil {
				t.Fatalf("fast path accepted what the generic path refuses (%v):\n%s", err, data)
			}
			fw, err1 := fd.MarshalJSON()
			gw, err2 := gd.MarshalJSON()
			if err1 != nil || err2 != nil || string(fw) != string(gw) {
				t.Fatalf("fast and generic paths differ:\nfast    %s\ngeneric %s\ninput   %s", fw, gw, data)
			}
		}
		d, err := descriptor.Parse(data)
		if err != nil {
			if code(err) == "" || strings.HasPrefix(code(err), "not ") {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		_ = d.Verify()
		_ = d.Live(time.Now(), descriptor.DefaultSkew)
		wire, err := d.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		d2, err := descriptor.Parse(wire)
		if err != nil {
			t.Fatalf("normalized form does not parse: %v\n%s", err, wire)
		}
		if string(d2.CanonicalBytes()) != string(d.CanonicalBytes()) {
			t.Fatalf("canonical bytes not stable:\n%s\n%s", d.CanonicalBytes(), d2.CanonicalBytes())
		}
		// The hand-written encoder agrees with the generic genesis profile.
		generic, err := pyjson.Marshal(d.Object())
		if err != nil {
			t.Fatalf("generic encoding: %v", err)
		}
		if string(generic) != string(wire) {
			t.Fatalf("encoders differ:\nfast    %s\ngeneric %s", wire, generic)
		}
		if w2, err := d.VerifyAndMarshal(); err == nil && string(w2) != string(wire) {
			t.Fatalf("VerifyAndMarshal wire form differs from MarshalJSON")
		}
	})
}

// TestEncodersAgree pins the hand-written encoder (one pass, no generic
// tree) to the generic genesis profile on every reference sample.
func TestEncodersAgree(t *testing.T) {
	for name, s := range loadSamples(t) {
		d, err := descriptor.Parse(s.Descriptor)
		if err != nil {
			t.Fatal(err)
		}
		wire, err := d.VerifyAndMarshal()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		generic, err := pyjson.Marshal(d.Object())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(generic), string(wire)); diff != "" {
			t.Errorf("%s: wire form (-generic +fast):\n%s", name, diff)
		}
		o := d.Object()
		delete(o, "signatures")
		canon, _ := pyjson.Marshal(o)
		if diff := cmp.Diff(string(canon), string(d.CanonicalBytes())); diff != "" {
			t.Errorf("%s: canonical bytes (-generic +fast):\n%s", name, diff)
		}
	}
}

// BenchmarkParse compares Parse (the one-pass path) with the generic tree
// path it falls back to, on reference sample 01 (with metadata).
func BenchmarkParse(b *testing.B) {
	s := loadSamples(b)["descriptor-01-basic-wss.json"]
	d, err := descriptor.Parse(s.Descriptor)
	if err != nil {
		b.Fatal(err)
	}
	w, _ := d.MarshalJSON()
	for _, bc := range []struct {
		name  string
		parse func([]byte) (*descriptor.Descriptor, error)
	}{{"fast", descriptor.Parse}, {"generic", descriptor.ParseGeneric}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				if _, err := bc.parse(w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
