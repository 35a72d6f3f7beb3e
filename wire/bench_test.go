package wire

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/capmesh/capmesh/identity"
)

// syntheticList is a Level 3 envelope of n methods in 8 domains with cost
// estimates and dependencies, as a capmesh host emits it.
func syntheticList(n int) []byte {
	var methods []string
	for i := range n {
		methods = append(methods, fmt.Sprintf("domain%d.operation_%d", i%8, i))
	}
	l := CapabilitiesList{
		Primal: "bench", Version: "1.0.0", Methods: methods,
		ProvidedCapabilities:  GroupByDomain(methods),
		ConsumedCapabilities:  []string{"crypto.sign", "storage.put"},
		CostEstimates:         map[string]CostEstimate{},
		OperationDependencies: map[string][]string{},
		Protocol:              Protocol, Transport: []string{"uds"},
	}
	for i, m := range methods {
		l.CostEstimates[m] = CostEstimate{CPU: CostLow, LatencyMS: float64(i)}
		if i > 0 {
			l.OperationDependencies[m] = []string{methods[i-1]}
		}
	}
	b, _ := json.Marshal(l)
	return b
}

// BenchmarkParse measures Parse on a rebuilt real response (rhizoCrypt, 42
// methods) and on synthetic envelopes, each beside its floor: decoding the
// same bytes once with encoding/json into an untyped value.
func BenchmarkParse(b *testing.B) {
	inputs := []struct {
		name string
		data []byte
	}{
		{"synthetic50", syntheticList(50)},
		{"synthetic500", syntheticList(500)},
	}
	if dir := specDirOrEmpty(); dir != "" {
		inputs = append(inputs, struct {
			name string
			data []byte
		}{"rhizocrypt", resultOf(b, ecoFile(b, "real-responses/rhizocrypt.capabilities.list.json"))})
	}
	for _, in := range inputs {
		b.Run(in.name+"/Parse", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(in.data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/floor-json-any", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(in.data, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAnnouncement measures signing and verifying a 50-method
// announcement beside the floor: the bare Ed25519 operation on 32 bytes.
func BenchmarkAnnouncement(b *testing.B) {
	key := identity.DeriveEcoPrimalsCompat("bench", "node")
	var methods []string
	for i := range 50 {
		methods = append(methods, fmt.Sprintf("domain%d.operation_%d", i%8, i))
	}
	sa := SignAnnouncement(key, "bench", "1.0.0", methods)
	msg := AnnouncementMessage("bench", "1.0.0", methods)
	seed := sha256.Sum256([]byte("primal-identity-key:bench:node"))
	raw := ed25519.NewKeyFromSeed(seed[:])
	sig := ed25519.Sign(raw, msg[:])
	pub := raw.Public().(ed25519.PublicKey)
	b.Run("Sign", func(b *testing.B) {
		for b.Loop() {
			SignAnnouncement(key, "bench", "1.0.0", methods)
		}
	})
	b.Run("floor-ed25519.Sign", func(b *testing.B) {
		for b.Loop() {
			ed25519.Sign(raw, msg[:])
		}
	})
	b.Run("Verify", func(b *testing.B) {
		for b.Loop() {
			if _, err := VerifyAnnouncement(sa, "bench", "1.0.0", methods); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor-ed25519.Verify", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(pub, msg[:], sig) {
				b.Fatal("bad")
			}
		}
	})
}

// BenchmarkLevel measures the compliance evaluation of a parsed 500-method
// envelope (no floor: it is pure bookkeeping over the parse).
func BenchmarkLevel(b *testing.B) {
	c, err := Parse(syntheticList(500))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		Level(c, nil)
	}
}
