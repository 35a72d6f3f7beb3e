package canonical

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/canonical/pydantic"
)

// readTree parses a test data file with our own reader.
func readTree(t *testing.T, path string) Value {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// field returns v[path...] or fails the test.
func field(t *testing.T, v Value, path ...string) Value {
	t.Helper()
	for _, k := range path {
		var ok bool
		if v, ok = v.Get(k); !ok {
			t.Fatalf("missing member %q", strings.Join(path, "."))
		}
	}
	return v
}

func str(t *testing.T, v Value, path ...string) string {
	t.Helper()
	f := field(t, v, path...)
	if f.Kind != String {
		t.Fatalf("%s: want a string, got %v", strings.Join(path, "."), f.Kind)
	}
	return f.Str
}

func canon(t *testing.T, p Profile, v Value) string {
	t.Helper()
	out, err := p.AppendCanonical(nil, v)
	if err != nil {
		t.Fatalf("%s: %v", p.Name(), err)
	}
	return string(out)
}

func obj(members ...Member) Value { return Value{Kind: Object, Obj: members} }

func strVal(s string) Value { return Value{Kind: String, Str: s} }

// TestCHPCanonCases replays the chp-stable-v1 and chp-jcs-v1 vectors of the
// CHP project byte for byte.
func TestCHPCanonCases(t *testing.T) {
	for _, tc := range []struct {
		file     string
		profiles []Profile
	}{
		{"chp/cases.json", []Profile{ChpStableV1, PythonSortKeys}},
		{"chp/cases-jcs.json", []Profile{ChpJcsV1, JCS}},
	} {
		doc := readTree(t, tc.file)
		cases := field(t, doc, "cases")
		if len(cases.Arr) == 0 {
			t.Fatalf("%s: no cases", tc.file)
		}
		for _, c := range cases.Arr {
			name, want := str(t, c, "name"), str(t, c, "expected_canon")
			for _, p := range tc.profiles {
				t.Run(p.Name()+"/"+name, func(t *testing.T) {
					if got := canon(t, p, field(t, c, "input")); got != want {
						t.Errorf("got  %q\nwant %q", got, want)
					}
				})
			}
		}
	}
}

// stableEvent builds the chp-event-hash-v1/v2 stable object of an evidence
// event (chp-v0.2.md §2, §14) the way the chp package will.
func stableEvent(t *testing.T, ev Value, prev Value, commitment string) Value {
	t.Helper()
	m := []Member{}
	for _, k := range []string{"event_id", "event_type", "invocation_id", "capability_id", "host_id", "timestamp", "outcome"} {
		m = append(m, Member{k, field(t, ev, k)})
	}
	m = append(m, Member{"correlation_id", field(t, ev, "correlation", "correlation_id")})
	if commitment != "" {
		m = append(m, Member{"payload_commitment", strVal(commitment)})
	} else {
		m = append(m, Member{"payload", field(t, ev, "payload")})
	}
	m = append(m, Member{"prev_hash", prev})
	return obj(m...)
}

func sha256Hex(t *testing.T, p Profile, v Value) string {
	t.Helper()
	sum, err := HashValue(p, v)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(sum[:])
}

// TestCHPEvidenceVectors recomputes the CHP evidence vectors: event content
// hashes (v1 and v2), the hash chain, the root hash, and the three
// signatures — bundle header under chp-stable-v1 and chp-jcs-v1, host
// identity attestation — which, Ed25519 being deterministic, match only if
// our canonical bytes are the reference's.
func TestCHPEvidenceVectors(t *testing.T) {
	expected := readTree(t, "chp/expected.json")
	seed, err := hex.DecodeString(str(t, expected, "private_key_seed_hex"))
	if err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	sign := func(msg string) string { return base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(msg))) }

	t.Run("event", func(t *testing.T) {
		ev := readTree(t, "chp/event.json")
		got := sha256Hex(t, ChpStableV1, stableEvent(t, field(t, ev, "event"), field(t, ev, "prev_hash"), ""))
		if want := str(t, expected, "event_content_hash"); got != want {
			t.Errorf("content_hash %s, want %s", got, want)
		}
	})

	for _, tc := range []struct {
		file    string
		profile Profile
		sig     string // expected header signature
	}{
		{"chp/signed-bundle.json", ChpStableV1, str(t, expected, "signature_b64")},
		{"chp/signed-bundle-jcs.json", ChpJcsV1, ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := readTree(t, tc.file)
			if got := str(t, b, "canonicalization"); got != tc.profile.Name() {
				t.Fatalf("bundle canonicalization %q, want %q", got, tc.profile.Name())
			}
			var chain strings.Builder
			for i, ev := range field(t, b, "events").Arr {
				got := sha256Hex(t, ChpStableV1, stableEvent(t, ev, field(t, ev, "prev_hash"), ""))
				if want := str(t, ev, "content_hash"); got != want {
					t.Errorf("event %d content_hash %s, want %s", i, got, want)
				}
				chain.WriteString(got + "\n")
			}
			root := sha256.Sum256([]byte(chain.String()))
			if got, want := hex.EncodeToString(root[:]), str(t, b, "root_hash"); got != want {
				t.Errorf("root_hash %s, want %s", got, want)
			}
			var hdr []Member
			for _, k := range []string{"host_id", "protocol_version", "created_at", "canonicalization", "root_hash"} {
				hdr = append(hdr, Member{k, field(t, b, k)})
			}
			want := str(t, b, "signature", "signature")
			if tc.sig != "" && tc.sig != want {
				t.Fatalf("vector files disagree on the header signature")
			}
			if got := sign(canon(t, tc.profile, obj(hdr...))); got != want {
				t.Errorf("header signature %s, want %s", got, want)
			}
			hi := field(t, b, "host_identity")
			var att []Member
			for _, k := range []string{"host_id", "public_key", "key_id", "valid_from", "valid_until"} {
				att = append(att, Member{k, field(t, hi, k)})
			}
			// The attestation is always chp-stable-v1, whatever the header uses.
			if got, want := sign(canon(t, ChpStableV1, obj(att...))), str(t, hi, "signature"); got != want {
				t.Errorf("host_identity signature %s, want %s", got, want)
			}
		})
	}

	t.Run("event-hash-v2", func(t *testing.T) {
		v := readTree(t, "chp/event-hash-v2.json")
		ev := field(t, v, "event")
		commitment := sha256Hex(t, ChpStableV1, field(t, ev, "payload"))
		if want := str(t, v, "payload_commitment"); commitment != want {
			t.Errorf("payload_commitment %s, want %s", commitment, want)
		}
		if got, want := sha256Hex(t, ChpStableV1, stableEvent(t, ev, field(t, v, "prev_hash"), commitment)), str(t, v, "content_hash"); got != want {
			t.Errorf("content_hash %s, want %s", got, want)
		}
	})
}

// normalizeDescriptor applies RFC-005-NOTES §2 to a wire descriptor: known
// fields only, defaults filled, timestamps in pydantic form, no signatures.
// (The registry package owns the real model; this is the test's own.)
func normalizeDescriptor(t *testing.T, d Value) Value {
	t.Helper()
	get := func(v Value, k string, def Value) Value {
		if x, ok := v.Get(k); ok {
			return x
		}
		return def
	}
	ts := func(k string) Value {
		tm, err := pydantic.ParseTime(str(t, d, k))
		if err != nil {
			t.Fatal(err)
		}
		return strVal(pydantic.Time(tm))
	}
	ep := field(t, d, "endpoint")
	return obj(
		Member{"agent_id", field(t, d, "agent_id")},
		Member{"node_public_key", field(t, d, "node_public_key")},
		Member{"network_name", field(t, d, "network_name")},
		Member{"capabilities", get(d, "capabilities", Value{Kind: Array, Arr: []Value{}})},
		Member{"endpoint", obj(
			Member{"host", field(t, ep, "host")},
			Member{"port", field(t, ep, "port")},
			Member{"scheme", get(ep, "scheme", strVal("ws"))},
		)},
		Member{"registered_at", ts("registered_at")},
		Member{"expires_at", ts("expires_at")},
		Member{"metadata", get(d, "metadata", Value{Kind: Object, Obj: []Member{}})},
	)
}

func verifyB64(t *testing.T, pubB64, sigB64 string, msg []byte) bool {
	t.Helper()
	pub, err := base64.StdEncoding.DecodeString(pubB64)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		t.Fatalf("bad public key %q", pubB64)
	}
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil {
		t.Fatalf("bad signature %q", sigB64)
	}
	return ed25519.Verify(pub, msg, sig)
}

// TestGenesisSamples reproduces the canonical bytes of every Genesis-Mesh
// sample descriptor byte for byte, checks its signature, and checks that
// signing with the sample seed gives the sample's signature.
func TestGenesisSamples(t *testing.T) {
	files, err := filepath.Glob("testdata/genesis/descriptor-*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s := readTree(t, strings.TrimPrefix(f, "testdata/"))
			d := field(t, s, "descriptor")
			got := canon(t, Genesis, normalizeDescriptor(t, d))
			if diff := cmp.Diff(str(t, s, "canonical_json"), got); diff != "" {
				t.Fatalf("canonical bytes (-want +got):\n%s", diff)
			}
			sig := field(t, d, "signatures").Arr[0]
			if !verifyB64(t, str(t, d, "node_public_key"), str(t, sig, "sig"), []byte(got)) {
				t.Error("signature does not verify over our canonical bytes")
			}
			seed, err := hex.DecodeString(str(t, s, "node_key", "seed_hex"))
			if err != nil {
				t.Fatal(err)
			}
			mine := base64.StdEncoding.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(seed), []byte(got)))
			if mine != str(t, sig, "sig") {
				t.Errorf("signing with the sample seed gives %s, want %s", mine, str(t, sig, "sig"))
			}
		})
	}
}

// TestGenesisNAObjects checks the Network Authority objects: the genesis
// block's canonical bytes, and every signature over Genesis(object minus
// "signatures").
func TestGenesisNAObjects(t *testing.T) {
	s := readTree(t, "genesis/na-objects.json")
	gb := field(t, s, "genesis_block")
	got := canon(t, Genesis, gb.Without("signatures"))
	if diff := cmp.Diff(str(t, s, "genesis_canonical_json"), got); diff != "" {
		t.Fatalf("genesis block canonical bytes (-want +got):\n%s", diff)
	}
	root := str(t, s, "keys", "root", "public_key_b64")
	na := str(t, s, "keys", "na", "public_key_b64")
	for _, tc := range []struct{ name, key string }{
		{"genesis_block", root},
		{"join_certificate", na},
		{"crl_initial", na},
		{"crl_after_revocation", na},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := field(t, s, tc.name)
			msg := canon(t, Genesis, o.Without("signatures"))
			sig := str(t, field(t, o, "signatures").Arr[0], "sig")
			if !verifyB64(t, tc.key, sig, []byte(msg)) {
				t.Errorf("signature does not verify over %s", msg)
			}
		})
	}
}

// TestGenesisTimestampsMatter pins the pitfall of RFC-005-NOTES §2.2: signing
// the wire timestamps instead of the normalized ones breaks the signature.
func TestGenesisTimestampsMatter(t *testing.T) {
	s := readTree(t, "genesis/descriptor-04-fractional-and-offset.json")
	d := field(t, s, "descriptor")
	norm := normalizeDescriptor(t, d)
	for i, m := range norm.Obj {
		if m.Key == "registered_at" || m.Key == "expires_at" {
			norm.Obj[i].Value = field(t, d, m.Key)
		}
	}
	wire := canon(t, Genesis, norm)
	sig := str(t, field(t, d, "signatures").Arr[0], "sig")
	if verifyB64(t, str(t, d, "node_public_key"), sig, []byte(wire)) {
		t.Fatal("signature verified over the wire timestamps; normalization would be untested")
	}
}
