package registry_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
)

var quiet = slog.New(slog.DiscardHandler)

// BenchmarkEd25519Verify is the floor of a signed registration.
func BenchmarkEd25519Verify(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	msg := make([]byte, 300)
	sig := ed25519.Sign(priv, msg)
	pub := priv.Public().(ed25519.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("verify")
		}
	}
}

// BenchmarkRegisterSigned admits pre-signed descriptors from a pool of
// pinned keys (each one newer than the last for its key), in memory.
func BenchmarkRegisterSigned(b *testing.B) {
	const pool = 1000
	keys := make([]ed25519.PrivateKey, pool)
	pins := make([]string, pool)
	for i := range keys {
		_, keys[i], _ = ed25519.GenerateKey(nil)
		pins[i] = base64.StdEncoding.EncodeToString(keys[i].Public().(ed25519.PublicKey))
	}
	n, err := registry.NewNode(registry.Config{Network: "N", TrustedKeys: pins, SweepInterval: time.Hour, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	base := time.Now()
	ds := make([]*descriptor.Descriptor, b.N)
	for i := range ds {
		k := keys[i%pool]
		d := descriptor.New(fmt.Sprintf("a%d", i%pool), "N", k.Public().(ed25519.PublicKey), []string{"cap:" + fmt.Sprint(i%50)},
			descriptor.Endpoint{Host: "127.0.0.1", Port: 9000, Scheme: "tcp"}, base.Add(time.Duration(i/pool)*time.Microsecond), time.Hour)
		_ = d.Sign(k)
		ds[i] = d
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := n.Register(ctx, ds[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFind100k: 100,000 live descriptors, 1,000 tags, 3 tags each
// (~300 providers per tag); reports p50/p99 latency of Find and the heap
// per descriptor.
func BenchmarkFind100k(b *testing.B) {
	const total, tags = 100_000, 1000
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	pins := make([]string, total)
	ds := make([]*descriptor.Descriptor, total)
	now := time.Now()
	for i := range ds {
		pub, priv, _ := ed25519.GenerateKey(nil)
		pins[i] = base64.StdEncoding.EncodeToString(pub)
		d := descriptor.New(fmt.Sprintf("agent-%d", i), "N", pub,
			[]string{fmt.Sprintf("t%d", i%tags), fmt.Sprintf("t%d", (i*7+1)%tags), fmt.Sprintf("t%d", (i*13+2)%tags)},
			descriptor.Endpoint{Host: "10.0.0.1", Port: 8000 + i%1000, Scheme: "tcp"}, now, time.Hour)
		_ = d.Sign(priv)
		ds[i] = d
	}
	n, err := registry.NewNode(registry.Config{Network: "N", TrustedKeys: pins, SweepInterval: time.Hour, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	for _, d := range ds {
		if _, err := n.Register(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	ds = nil
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		if got := n.Find(fmt.Sprintf("t%d", i%tags), registry.FindOptions{}); len(got) == 0 {
			b.Fatal("empty")
		}
		lat = append(lat, time.Since(t))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(ms1.HeapAlloc-ms0.HeapAlloc)/total, "heap-B/descriptor")
}
