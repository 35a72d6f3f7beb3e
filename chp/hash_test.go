package chp

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/canonical"

	"github.com/capmesh/capmesh/internal/specdata"
)

// specDir is the CHP test data copied into the repository.
func specDir(t testing.TB) string {
	t.Helper()
	return specdata.Path("chp")
}

func readSpec(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(specDir(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStableCanonVectors(t *testing.T) {
	var f struct {
		Cases []struct {
			Name     string          `json:"name"`
			Input    json.RawMessage `json:"input"`
			Expected string          `json:"expected_canon"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(readSpec(t, "vectors/canon/cases.json"), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := canonical.Canonicalize(canonical.ChpStableV1, c.Input)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.Expected, string(got)); diff != "" {
				t.Errorf("canon mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPyFloatRepr(t *testing.T) {
	for in, want := range map[string]string{
		"0.0": "0.0", "1.5": "1.5", "1e5": "100000.0", "1E+2": "100.0", "1e16": "1e+16",
		"0.0001": "0.0001", "0.00001": "1e-05", "-2.50": "-2.5", "123456789012345678.0": "1.2345678901234568e+17",
	} {
		got, err := canonical.Canonicalize(canonical.PythonSortKeys, []byte(in))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %q (%v), want %q", in, got, err, want)
		}
	}
	if _, err := canonical.Canonicalize(canonical.ChpStableV1, []byte(`{"a":1.5}`)); err == nil {
		t.Error("strict canon accepted a float")
	}
}

func TestEventHashVectors(t *testing.T) {
	var v1 struct {
		Event json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(readSpec(t, "vectors/event.json"), &v1); err != nil {
		t.Fatal(err)
	}
	var exp struct {
		EventContentHash string `json:"event_content_hash"`
		RootHash         string `json:"root_hash"`
		Chained          struct {
			Completed string `json:"completed_content_hash"`
			Started   string `json:"started_content_hash"`
		} `json:"chained"`
		Seed string `json:"private_key_seed_hex"`
		Pub  string `json:"public_key_b64"`
	}
	if err := json.Unmarshal(readSpec(t, "vectors/expected.json"), &exp); err != nil {
		t.Fatal(err)
	}
	got, err := EventContentHash(v1.Event, "")
	if err != nil || got != exp.EventContentHash {
		t.Errorf("v1 content hash = %s (%v), want %s", got, err, exp.EventContentHash)
	}
	if r := RootHash([]string{exp.Chained.Started, exp.Chained.Completed}); r != exp.RootHash {
		t.Errorf("root hash = %s, want %s", r, exp.RootHash)
	}
	var v2 struct {
		Event       json.RawMessage `json:"event"`
		ContentHash string          `json:"content_hash"`
		Commitment  string          `json:"payload_commitment"`
	}
	if err := json.Unmarshal(readSpec(t, "vectors/event-hash-v2.json"), &v2); err != nil {
		t.Fatal(err)
	}
	if got, err := EventContentHash(v2.Event, ""); err != nil || got != v2.ContentHash {
		t.Errorf("v2 content hash = %s (%v), want %s", got, err, v2.ContentHash)
	}
	var ev struct {
		Payload json.RawMessage `json:"payload"`
	}
	_ = json.Unmarshal(v2.Event, &ev)
	if c, _ := PayloadCommitment(ev.Payload); c != v2.Commitment {
		t.Errorf("commitment = %s, want %s", c, v2.Commitment)
	}
	// The fixed seed reproduces the vector key id.
	seed, _ := hex.DecodeString(exp.Seed)
	key := ed25519.NewKeyFromSeed(seed)
	if kid := KeyID(key.Public().(ed25519.PublicKey)); kid != "56475aa75463474c" {
		t.Errorf("key id = %s", kid)
	}
}

func TestVerifyReferenceBundles(t *testing.T) {
	cases := []struct {
		file      string
		assurance string
		valid     bool
	}{
		{"vectors/signed-bundle.json", "signed", true},
		{"vectors/signed-bundle-jcs.json", "signed", true},
		{"vectors/signed-bundle-complete.json", "signed", true},
		{"vectors/signed-bundle-anchored.json", "signed", true},
		{"vectors/governance-bundle.json", "signed", true},
		{"vectors/bundle-withheld.json", "signed", true},
		{"recorded/export-bundle.python-reference-host.hash-chain.json", "hash-chain", true},
		{"recorded/export-bundle.ts-reference-host.hash-chain.json", "hash-chain", true},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			v, err := VerifyBundle(readSpec(t, c.file), nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.Valid != c.valid || v.Assurance != c.assurance {
				t.Errorf("valid=%v assurance=%s, want %v %s; checks %+v", v.Valid, v.Assurance, c.valid, c.assurance, v.Checks)
			}
			// A reference host binds no attribution: every event is
			// reported unbound, with a warning, and no binding check.
			if v.Unbound != v.EventCount || v.Bound != 0 || len(v.Attribution) != v.EventCount || len(v.Warnings) == 0 {
				t.Errorf("attribution: bound %d unbound %d of %d, warnings %q", v.Bound, v.Unbound, v.EventCount, v.Warnings)
			}
			for _, a := range v.Attribution {
				if a.Attribution != AttributionUnbound {
					t.Errorf("event %d: %s", a.Index, a.Attribution)
				}
			}
			for _, ch := range v.Checks {
				if ch.Name == "capmesh_binding" {
					t.Errorf("binding check on a bundle that binds nothing: %+v", ch)
				}
			}
		})
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	orig := readSpec(t, "vectors/signed-bundle.json")
	edits := map[string]func(m map[string]any){
		"relabelled host": func(m map[string]any) { m["host_id"] = "evil-host" },
		"created_at":      func(m map[string]any) { m["created_at"] = "2027-01-01T00:00:00Z" },
		"event type": func(m map[string]any) {
			m["events"].([]any)[0].(map[string]any)["event_type"] = "execution_denied"
		},
		"dropped event": func(m map[string]any) { m["events"] = m["events"].([]any)[1:] },
		"reordered": func(m map[string]any) {
			e := m["events"].([]any)
			e[0], e[1] = e[1], e[0]
		},
		"root hash":      func(m map[string]any) { m["root_hash"] = strings.Repeat("0", 64) },
		"bad canon name": func(m map[string]any) { m["canonicalization"] = "chp-bogus-v1" },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(orig, &m); err != nil {
				t.Fatal(err)
			}
			edit(m)
			b, _ := json.Marshal(m)
			v, err := VerifyBundle(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.Valid {
				t.Errorf("tampered bundle verified: %+v", v.Checks)
			}
		})
	}
	if v, _ := VerifyBundle(orig, &VerifyOptions{ExpectedKeyID: "0000000000000000"}); v.Valid {
		t.Error("bundle verified under a different expected key")
	}
}

// TestCompletenessClaimTampering: an edited completeness claim fails the
// completeness check itself — the bundle is re-signed after the edit, so the
// signature cannot be what catches it. A later as_of_sequence is a legal
// claim; an earlier one, another head or another correlation is not.
func TestCompletenessClaimTampering(t *testing.T) {
	var exp struct {
		Seed string `json:"private_key_seed_hex"`
	}
	if err := json.Unmarshal(readSpec(t, "vectors/expected.json"), &exp); err != nil {
		t.Fatal(err)
	}
	seed, _ := hex.DecodeString(exp.Seed)
	key := ed25519.NewKeyFromSeed(seed)
	orig := readSpec(t, "vectors/signed-bundle-complete.json")
	for _, c := range []struct {
		name  string
		edit  func(c *Completeness)
		valid bool
	}{
		{"untouched", func(*Completeness) {}, true},
		{"later as_of_sequence", func(c *Completeness) { c.AsOfSequence += 5 }, true},
		{"earlier as_of_sequence", func(c *Completeness) { c.AsOfSequence-- }, false},
		{"head_hash", func(c *Completeness) { c.HeadHash = strings.Repeat("0", 64) }, false},
		{"correlation_id", func(c *Completeness) { c.CorrelationID = "corr_other" }, false},
		{"scheme", func(c *Completeness) { c.Scheme = "chp-completeness-v0" }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b EvidenceBundle
			if err := json.Unmarshal(orig, &b); err != nil || b.Completeness == nil {
				t.Fatalf("%v %+v", err, b.Completeness)
			}
			c.edit(b.Completeness)
			if err := SignBundle(&b, key); err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(&b)
			v, err := VerifyBundle(data, nil)
			if err != nil {
				t.Fatal(err)
			}
			checks := map[string]bool{}
			for _, ch := range v.Checks {
				checks[ch.Name] = ch.OK
			}
			if !checks["signature"] {
				t.Fatalf("re-signed bundle's signature fails: %+v", v.Checks)
			}
			if ok, present := checks["completeness"]; !present || ok != c.valid || v.Valid != c.valid {
				t.Errorf("completeness check %v (present %v), bundle valid %v; want %v: %+v", ok, present, v.Valid, c.valid, v.Checks)
			}
		})
	}
}
