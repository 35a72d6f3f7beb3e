package chp

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/bits"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/govalue"
)

// TestIDsAreRandom128Bit: ids are the prefix, "_" and 128 bits in hex;
// consecutive ids share no structure (about half their bits differ, as
// independent random values do: a counter or a timestamp differs in a
// few), and each pooled generator is seeded afresh from crypto/rand (two
// new generators never start alike).
func TestIDsAreRandom128Bit(t *testing.T) {
	decode := func(id, prefix string) []byte {
		t.Helper()
		h, ok := strings.CutPrefix(id, prefix+"_")
		b, err := hex.DecodeString(h)
		if !ok || err != nil || len(b) != 16 || strings.ToLower(h) != h {
			t.Fatalf("id %q is not %s_ and 32 lowercase hex digits", id, prefix)
		}
		return b
	}
	const n = 2000
	seen := make(map[string]bool, n)
	prev := decode(NewID("inv"), "inv")
	diff := 0
	for range n {
		var ids [4]string
		NewIDs(ids[:], "inv", "corr", "evt", "evt")
		for i, p := range []string{"inv", "corr", "evt", "evt"} {
			if seen[ids[i]] {
				t.Fatalf("id %s drawn twice", ids[i])
			}
			seen[ids[i]] = true
			cur := decode(ids[i], p)
			for j := range cur {
				diff += bits.OnesCount8(cur[j] ^ prev[j])
			}
			prev = cur
		}
	}
	// Over 4n = 8,000 pairs of 128 random bits the mean is 64 with a
	// standard deviation of about 0.06; the margin is wide.
	if mean := float64(diff) / (4 * n); mean < 60 || mean > 68 {
		t.Errorf("consecutive ids differ in %.1f bits on average, want about 64", mean)
	}
	a, b := idPool.New().(*mrand.ChaCha8), idPool.New().(*mrand.ChaCha8)
	if [2]uint64{a.Uint64(), a.Uint64()} == [2]uint64{b.Uint64(), b.Uint64()} {
		t.Error("two new generators produce the same stream: not seeded from crypto/rand")
	}
}

// TestDIDAnchorFailsClosed: a signed bundle whose host-identity
// attestation carries a did anchor is invalid (check did_anchor) even
// though the attestation's signature, which covers the anchors, verifies;
// the same bundle with a domain anchor is valid.
func TestDIDAnchorFailsClosed(t *testing.T) {
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
		anchor map[string]any
		valid  bool
	}{
		{map[string]any{"type": "domain", "domain": "host.example"}, true},
		{map[string]any{"type": "did", "did": "did:key:z6MkhFwXNFWosLeugvSf4wcL9t3uuRXueGSFTRgSvHhWj5G2"}, false},
	} {
		var b EvidenceBundle
		if err := json.Unmarshal(orig, &b); err != nil {
			t.Fatal(err)
		}
		if err := SignBundle(&b, key); err != nil {
			t.Fatal(err)
		}
		// Re-sign the attestation over its anchors.
		hi := b.HostIdentity
		anchors := []any{c.anchor}
		hi.Anchors, _ = json.Marshal(anchors)
		msg, err := govalue.Marshal(canonical.ChpStableV1, map[string]any{
			"host_id": hi.HostID, "public_key": hi.PublicKey, "key_id": hi.KeyID,
			"valid_from": *hi.ValidFrom, "valid_until": nil, "anchors": anchors,
		})
		if err != nil {
			t.Fatal(err)
		}
		hi.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
		data, _ := json.Marshal(&b)
		v, err := VerifyBundle(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		checks := map[string]bool{}
		for _, ch := range v.Checks {
			checks[ch.Name] = ch.OK
		}
		if !checks["signature"] || !checks["host_identity"] {
			t.Fatalf("%s anchor: signature or attestation fails: %+v", c.anchor["type"], v.Checks)
		}
		ok, present := checks["did_anchor"]
		if v.Valid != c.valid || present == c.valid || ok {
			t.Errorf("%s anchor: valid %v, did_anchor check %v (present %v); want valid %v: %+v",
				c.anchor["type"], v.Valid, ok, present, c.valid, v.Checks)
		}
	}
}
