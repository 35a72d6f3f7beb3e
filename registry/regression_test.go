package registry_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
)

// keyWhere derives deterministic node keys until one satisfies ok.
func keyWhere(t *testing.T, label string, ok func(std, urlRaw string) bool) ed25519.PrivateKey {
	t.Helper()
	for i := 0; i < 100000; i++ {
		seed := sha256.Sum256(fmt.Appendf(nil, "%s:%d", label, i))
		k := ed25519.NewKeyFromSeed(seed[:])
		pub := k.Public().(ed25519.PublicKey)
		if ok(base64.StdEncoding.EncodeToString(pub), base64.RawURLEncoding.EncodeToString(pub)) {
			return k
		}
	}
	t.Fatalf("no key for %s", label)
	return nil
}

// TestAgentKeyInPathRegression: GET /agents/{key} with a base64url key
// whose URL form has neither '-' nor '_' (about one key in four) was taken
// as standard base64 without its padding and answered 404 — the registry
// test failed one run in four. Every form of every key must resolve.
func TestAgentKeyInPathRegression(t *testing.T) {
	g := newGenesisNode(t, registry.NewMemStore())
	keys := map[string]ed25519.PrivateKey{
		"url form without - or _": keyWhere(t, "plain", func(_, u string) bool { return !strings.ContainsAny(u, "-_") }),
		"url form with - and _":   keyWhere(t, "dash", func(_, u string) bool { return strings.Contains(u, "-") && strings.Contains(u, "_") }),
		"standard form starts /":  keyWhere(t, "slash", func(s, _ string) bool { return s[0] == '/' }),
	}
	now := time.Now()
	for name, k := range keys {
		pub := k.Public().(ed25519.PublicKey)
		std := base64.StdEncoding.EncodeToString(pub)
		if _, err := g.n.Enroll(t.Context(), std, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		if code, out, _ := g.do(t, "POST", "/agents", wire(signed(t, k, "SAMPLE-NET", []string{"x"}, now, time.Hour)), nil); code != 200 {
			t.Fatalf("%s: register %d %v", name, code, out)
		}
		forms := map[string]string{
			"standard, percent-encoded": url.PathEscape(std),
			"base64url unpadded":        base64.RawURLEncoding.EncodeToString(pub),
			"base64url padded":          base64.URLEncoding.EncodeToString(pub),
		}
		for form, p := range forms {
			code, out, _ := g.do(t, "GET", "/agents/"+p, nil, nil)
			if code != 200 || out["node_public_key"] != std {
				t.Errorf("%s, %s (%s): %d %v", name, form, p, code, out)
			}
		}
	}
	if code, _, _ := g.do(t, "GET", "/agents/"+base64.RawURLEncoding.EncodeToString(make([]byte, 31)), nil, nil); code != 404 {
		t.Errorf("31-byte key: %d, want 404", code)
	}
}

// TestAgentListBody pins GET /agents, whose body is spliced from the stored
// wire forms, to the generic genesis encoding of the whole answer (the
// reference's jsonify), including non-ASCII capability and metadata.
func TestAgentListBody(t *testing.T) {
	g := newGenesisNode(t, registry.NewMemStore())
	now := time.Now()
	var all []map[string]any
	for i, caps := range [][]string{{"llm:chat", "ünï"}, {"ünï"}, {"other"}} {
		k := benchKey(1000 + i)
		if _, err := g.n.Enroll(t.Context(), base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey)), nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		d := signed(t, k, "SAMPLE-NET", caps, now.Add(time.Duration(i)*time.Second), time.Hour)
		d.Metadata = map[string]any{"note": "😀 <&>", "n": json.Number("1.50")}
		if err := d.Sign(k); err != nil {
			t.Fatal(err)
		}
		if code, out, _ := g.do(t, "POST", "/agents", wire(d), nil); code != 200 {
			t.Fatalf("register: %d %v", code, out)
		}
		all = append(all, d.Object())
	}
	for _, tc := range []struct {
		query string
		want  []map[string]any // newest first
		capv  any
	}{
		{"", []map[string]any{all[2], all[1], all[0]}, nil},
		{"?capability=" + url.QueryEscape("ünï"), []map[string]any{all[1], all[0]}, "ünï"},
		{"?capability=none", nil, "none"},
	} {
		agents := []any{}
		for _, a := range tc.want {
			agents = append(agents, a)
		}
		want, err := pyjson.Marshal(map[string]any{"agents": agents, "capability": tc.capv, "count": len(tc.want)})
		if err != nil {
			t.Fatal(err)
		}
		_, _, got := g.do(t, "GET", "/agents"+tc.query, nil, nil)
		if diff := cmp.Diff(string(want)+"\n", string(got)); diff != "" {
			t.Errorf("GET /agents%s (-generic +served):\n%s", tc.query, diff)
		}
	}
}

// TestTrustVerdictFollowsCertificates: verdicts are cached per entry; they
// must still follow certificate expiry (by time alone, no trust change)
// and re-enrolment (a trust change of that key only).
func TestTrustVerdictFollowsCertificates(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	n := newNode(t, registry.Config{Network: "N", Now: clock, SweepInterval: time.Hour})
	k, other := benchKey(2000), benchKey(2001)
	for _, key := range []ed25519.PrivateKey{k, other} {
		if _, err := n.Enroll(t.Context(), base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)), nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Register(t.Context(), signed(t, key, "N", []string{"x"}, clock(), 3*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	trusted := func() int { return len(n.Find("x", registry.FindOptions{})) }
	if got := trusted(); got != 2 {
		t.Fatalf("before expiry: %d trusted providers, want 2", got)
	}
	advance(61 * time.Minute) // both certificates expired, the descriptors have not
	if got := trusted(); got != 0 {
		t.Fatalf("after certificate expiry: %d trusted providers, want 0", got)
	}
	all := n.Find("x", registry.FindOptions{IncludeUntrusted: true})
	if len(all) != 2 || all[0].Trust.Trusted || all[0].Trust.Reason != "no active join certificate (revoked or expired)" {
		t.Fatalf("untrusted view: %+v", all)
	}
	n.Sweep(t.Context()) // the sweeper stores the lapsed verdicts
	if got := trusted(); got != 0 {
		t.Fatalf("after sweep: %d trusted providers, want 0", got)
	}
	// Re-enrolling one key restores that provider alone, at once.
	if _, err := n.Enroll(t.Context(), base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey)), nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	got := n.Find("x", registry.FindOptions{})
	if len(got) != 1 || got[0].Key != base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey)) || !strings.HasPrefix(got[0].Trust.Reason, "enrolled: join certificate ") {
		t.Fatalf("after re-enrolment: %+v", got)
	}
	// Revoking the new certificate (not for compromise) evicts at once.
	if _, err := n.Revoke(t.Context(), "", got[0].Key, registry.ReasonSuperseded); err != nil {
		t.Fatal(err)
	}
	if got := trusted(); got != 0 {
		t.Fatalf("after revocation: %d trusted providers, want 0", got)
	}
}

// TestPolicyManifest: GET /policy, which a Genesis-Mesh node fetches and
// verifies right after joining, is signed by the authority over the
// genesis canonical form and stays the same across a restart.
func TestPolicyManifest(t *testing.T) {
	st := registry.NewMemStore()
	g := newGenesisNode(t, st)
	code, p, raw := g.do(t, "GET", "/policy", nil, nil)
	if code != 200 || p["policy_id"] != "policy-SAMPLE-NET-v1" || p["issued_by"] != "na-capmesh" {
		t.Fatalf("GET /policy: %d %s", code, raw)
	}
	obj, err := pyjson.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	m := obj.(map[string]any)
	sig := m["signatures"].([]any)[0].(map[string]any)["sig"].(string)
	delete(m, "signatures")
	msg, _ := pyjson.Marshal(m)
	if err := descriptor.VerifySignature(g.n.AuthorityPublicKey(), msg, sig); err != nil {
		t.Fatalf("policy signature: %v", err)
	}
	g.n.Close()
	g2 := newGenesisNode(t, st)
	if _, _, raw2 := g2.do(t, "GET", "/policy", nil, nil); string(raw2) != string(raw) {
		t.Errorf("policy changed across a restart:\n%s\n%s", raw, raw2)
	}
}

// TestConcurrentReadersAndWriters exercises the two-lock scheme (writers
// serialized by one lock and publishing under the readers' lock) with
// every reader and writer at once; run with -race.
func TestConcurrentReadersAndWriters(t *testing.T) {
	n := newNode(t, registry.Config{Network: "N", SweepInterval: 5 * time.Millisecond, Logger: quiet})
	ctx := t.Context()
	const keys = 8
	var wg sync.WaitGroup
	stop := make(chan struct{})
	loop := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
					f(i)
				}
			}
		}()
	}
	keyOf := func(i int) (ed25519.PrivateKey, string) {
		k := benchKey(3000 + i%keys)
		return k, base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))
	}
	for i := 0; i < keys; i++ {
		_, key := keyOf(i)
		if _, err := n.Enroll(ctx, key, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for w := 0; w < 2; w++ {
		loop(func(i int) {
			k, _ := keyOf(i*2 + w) // each writer its own keys
			_, _ = n.Register(ctx, signed(t, k, "N", []string{"x", fmt.Sprint(i % 3)}, time.Now(), 20*time.Millisecond))
		})
	}
	// Trust churn on half the keys: revoke, enrol again.
	loop(func(i int) {
		_, key := keyOf(keys/2 + i%(keys/2))
		if i%2 == 0 {
			_, _ = n.Revoke(ctx, "", key, registry.ReasonSuperseded)
		} else {
			_, _ = n.Enroll(ctx, key, nil, time.Hour)
		}
	})
	loop(func(int) { n.Find("x", registry.FindOptions{IncludeUntrusted: true}) })
	loop(func(int) { n.FindFunc("x", registry.FindOptions{}, func(registry.Entry) bool { return true }) })
	loop(func(int) { n.List(true); n.Certificates("") })
	loop(func(int) { _, _, _ = n.Watch(ctx, 0, nil, 0) })
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if n.Version() == 0 {
		t.Fatal("no change was made")
	}
	// Everything that is listed is live and trusted — live when List
	// looked, which is after now (descriptors here live 20 ms: a clock
	// read after List may already be past them).
	now := time.Now()
	for _, e := range n.List(false) {
		if !e.Trust.Trusted || !now.Before(e.ExpiresAt) {
			t.Errorf("listed: %+v", e)
		}
	}
}

// TestCloseEndsWatches: a pending long poll returns as soon as the node is
// closed, so a server's drain is not held up by watchers.
func TestCloseEndsWatches(t *testing.T) {
	n, err := registry.NewNode(registry.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, evs, err := n.Watch(t.Context(), 0, nil, time.Minute)
		if err == nil && len(evs) != 0 {
			err = fmt.Errorf("events %v", evs)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	n.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("watch ended %s after Close", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch still pending 10 s after Close")
	}
}
