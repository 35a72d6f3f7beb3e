package witnessing

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/internal/specdata"
)

func readVector(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(specdata.Path("chp"), "vectors", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestChainWitnessVectors(t *testing.T) {
	for _, name := range []string{"chain-witness.json", "chain-witness-revfresh.json"} {
		w, err := ParseChainWitness(readVector(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w.HostID != "vector-witnessed-host" || w.Sequence != 42 {
			t.Fatalf("%s: %+v", name, w)
		}
	}
}

// TestChainWitnessRefusals flips each signed member of the vector and
// checks the statement no longer verifies.
func TestChainWitnessRefusals(t *testing.T) {
	base := string(readVector(t, "chain-witness-revfresh.json"))
	for name, edit := range map[string][2]string{
		"store_head":              {`"5b06c362`, `"5b06c363`},
		"revocation_head":         {`"880e73bf`, `"880e73be`},
		"sequence":                {`"sequence": 42`, `"sequence": 43`},
		"host_id":                 {`"host_id": "vector-witnessed-host"`, `"host_id": "other-host"`},
		"witnessed_at":            {`"witnessed_at": "2026-01-01T00:00:00Z"`, `"witnessed_at": "2026-01-02T00:00:00Z"`},
		"kind":                    {`"kind": "chain-witness"`, `"kind": "chain-witnesz"`},
		"canonicalization":        {`"canonicalization": "chp-stable-v1"`, `"canonicalization": "chp-jcs-v1"`},
		"unknown member":          {`"kind"`, `"extra": 1, "kind"`},
		"duplicate member":        {`"kind"`, `"sequence": 42, "kind"`},
		"revocation_head dropped": {`"revocation_head": "880e73bf2588f6ad9cb3f19fde5deefc3713b408fd8e4afa9373234098560c86",`, ``},
		"key_id": {`"key_id": "56475aa75463474c",
    "signature"`, `"key_id": "56475aa75463474d",
    "signature"`},
	} {
		bad := strings.Replace(base, edit[0], edit[1], 1)
		if bad == base {
			t.Fatalf("%s: edit did not apply", name)
		}
		if _, err := ParseChainWitness([]byte(bad)); !errors.Is(err, ErrInvalidWitness) {
			t.Errorf("%s: err = %v, want ErrInvalidWitness", name, err)
		}
	}
}

func TestNewChainWitnessRoundTrip(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	for _, rev := range []string{"", EmptyRevocationHead} {
		raw, err := NewChainWitness("h", 7, strings.Repeat("ab", 32), rev, "w", key, "2026-01-01T00:00:00Z")
		if err != nil {
			t.Fatal(err)
		}
		w, err := ParseChainWitness(raw)
		if err != nil {
			t.Fatalf("rev %q: %v\n%s", rev, err, raw)
		}
		if w.RevocationHead != rev || bytes.Contains(raw, []byte("revocation_head")) != (rev != "") {
			t.Fatalf("revocation_head not omit-when-empty: %s", raw)
		}
	}
}

func TestStoreHeadAnchorVector(t *testing.T) {
	raw := readVector(t, "store-head-anchor.json")
	a, err := ParseStoreHeadAnchor(raw)
	if err != nil {
		t.Fatal(err)
	}
	if a.Sequence != 42 {
		t.Fatal(a)
	}
	var doc map[string]json.RawMessage
	_ = json.Unmarshal(readVector(t, "store-head-consistency.json"), &doc)
	for _, k := range []string{"first_anchor", "second_anchor"} {
		if _, err := ParseStoreHeadAnchor(doc[k]); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
}

// TestStoreHeadAnchorTampered: a countersignature over another head, by
// another key, under another namespace, or damaged, is refused.
func TestStoreHeadAnchorTampered(t *testing.T) {
	base := string(readVector(t, "store-head-anchor.json"))
	for name, edit := range map[string][2]string{
		"store_head":  {`"3b0cc1fa`, `"3b0cc1fb`},
		"sequence":    {`"sequence": 42`, `"sequence": 41`},
		"anchored_at": {`"anchored_at": "2026-01-01T00:00:00Z"`, `"anchored_at": "2026-01-01T00:00:01Z"`},
		"did":         {`z6MkhFwXNFWosLeugvSf4wcL9t3uuRXueGSFTRgSvHhWj5G2`, `z6MkhFwXNFWosLeugvSf4wcL9t3uuRXueGSFTRgSvHhWj5G3`},
		"signature":   {`L/hLIl5S8kyKWbdc`, `L/hLIl5S8kyKWbdd`},
		"sig bytes":   {`uc2lHAv6qkQQ=`, `uc2lHAv6qkQA=`},
		"type":        {`"type": "did"`, `"type": "rekor"`},
		"armor":       {`-----BEGIN SSH SIGNATURE-----`, `-----BEGIN SSH SIGNATUR-----`},
	} {
		bad := strings.Replace(base, edit[0], edit[1], 1)
		if bad == base {
			t.Fatalf("%s: edit did not apply", name)
		}
		if _, err := ParseStoreHeadAnchor([]byte(bad)); !errors.Is(err, ErrInvalidWitness) {
			t.Errorf("%s: err = %v, want ErrInvalidWitness", name, err)
		}
	}
	// Another key's countersignature over the right message, under the right
	// and a wrong namespace.
	_, other, _ := ed25519.GenerateKey(nil)
	msg, _ := StoreHeadAnchorMessage("vector-witnessed-host", 42, "3b0cc1fa06529112ead2292b581e8206dfff42aa4cbe55f9246163ad540ab2d1", "2026-01-01T00:00:00Z")
	pub, _ := DIDKeyPublicKey("did:key:z6MkhFwXNFWosLeugvSf4wcL9t3uuRXueGSFTRgSvHhWj5G2")
	sig, _ := SignSSHSIG(other, msg, AnchorNamespace)
	if err := VerifySSHSIG(sig, msg, AnchorNamespace, pub); !errors.Is(err, ErrSSHSIG) {
		t.Fatalf("another key's signature verified: %v", err)
	}
	otherPub := other.Public().(ed25519.PublicKey)
	if err := VerifySSHSIG(sig, msg, AnchorNamespace, otherPub); err != nil {
		t.Fatalf("own signature: %v", err)
	}
	if err := VerifySSHSIG(sig, msg, "file", otherPub); !errors.Is(err, ErrSSHSIG) {
		t.Fatalf("namespace not checked: %v", err)
	}
	if DIDKey(pub) != "did:key:z6MkhFwXNFWosLeugvSf4wcL9t3uuRXueGSFTRgSvHhWj5G2" {
		t.Fatal("DIDKey does not round-trip")
	}
}

func TestStoreHeadV2Vectors(t *testing.T) {
	var v struct {
		Leaves    map[string]string `json:"leaves"`
		StoreHead string            `json:"store_head"`
	}
	if err := json.Unmarshal(readVector(t, "store-head-v2.json"), &v); err != nil {
		t.Fatal(err)
	}
	if got, _ := StoreHeadRoot(StoreHeadV2, v.Leaves); got != v.StoreHead {
		t.Fatalf("v2 root %s, want %s", got, v.StoreHead)
	}
	var incl struct {
		Proof StoreHeadInclusion `json:"proof"`
	}
	_ = json.Unmarshal(readVector(t, "store-head-inclusion.json"), &incl)
	p, _ := NewStoreHeadInclusion(v.Leaves, "corr_2")
	if !VerifyStoreHeadInclusion(v.StoreHead, "corr_2", incl.Proof.HeadHash, incl.Proof) ||
		strings.Join(p.AuditPath, ",") != strings.Join(incl.Proof.AuditPath, ",") {
		t.Fatalf("inclusion vector: %+v vs %+v", p, incl.Proof)
	}
	if VerifyStoreHeadInclusion(v.StoreHead, "corr_2", strings.Repeat("f", 64), incl.Proof) {
		t.Fatal("forged head_hash verified")
	}
	var cons struct {
		Proof StoreHeadConsistency `json:"proof"`
	}
	_ = json.Unmarshal(readVector(t, "store-head-consistency.json"), &cons)
	if !VerifyStoreHeadConsistency(cons.Proof.FirstRoot, cons.Proof.SecondRoot, cons.Proof) {
		t.Fatal("consistency vector does not verify")
	}
	if VerifyStoreHeadConsistency(strings.Repeat("0", 64), cons.Proof.SecondRoot, cons.Proof) {
		t.Fatal("wrong first root verified")
	}
}

// TestStoreHeadV2NotAppendOnly pins the v2 flaw: a new correlation sorting
// before an existing one, or a new event in an old correlation, makes the
// honest consistency proof fail; only appends at the end of the sort order
// verify.
func TestStoreHeadV2NotAppendOnly(t *testing.T) {
	h := func(c byte) string { return strings.Repeat(string(c), 64) }
	old := map[string]string{"b": h('1'), "d": h('2'), "f": h('3')}
	grow := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range old {
			if a != k {
				m[a] = b
			}
		}
		return m
	}
	oldRoot, _ := StoreHeadRoot(StoreHeadV2, old)
	for name, tc := range map[string]struct {
		newer map[string]string
		ok    bool
	}{
		"append at end":          {grow("g", h('4')), true},
		"new correlation before": {grow("a", h('4')), false},
		"old correlation moves":  {grow("d", h('5')), false},
	} {
		p := NewStoreHeadConsistency(old, tc.newer)
		newRoot, _ := StoreHeadRoot(StoreHeadV2, tc.newer)
		if got := VerifyStoreHeadConsistency(oldRoot, newRoot, p); got != tc.ok {
			t.Errorf("%s: verified = %v, want %v", name, got, tc.ok)
		}
	}
}

func TestRevocationHead(t *testing.T) {
	if RevocationHead(nil) != EmptyRevocationHead {
		t.Fatal("empty set")
	}
	a := RevocationHead([]string{"k\x00b", "m\x00a\x00p", "k\x00b"})
	if a != RevocationHead([]string{"m\x00a\x00p", "k\x00b"}) || a == EmptyRevocationHead {
		t.Fatal("order or duplicates move the head")
	}
}
