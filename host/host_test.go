package host_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/schema"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
	"github.com/capmesh/capmesh/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testKey is a fixed key so that signed envelopes are reproducible.
var testKey = ed25519.NewKeyFromSeed([]byte("capmesh host library test key 32"))

// kv is a small store behind the test capabilities.
type kv struct {
	mu sync.Mutex
	m  map[string]string
}

type putIn struct {
	Key   string `json:"key" jsonschema:"the key"`
	Value string `json:"value"`
	TTL   int    `json:"ttl,omitempty"`
}

type getIn struct {
	Key string `json:"key"`
}

type getOut struct {
	Value string `json:"value"`
	Found bool   `json:"found"`
}

// newKVHost returns an in-memory host with kv.put, kv.get and kv.delete.
func newKVHost(t testing.TB, cfg *host.Config) *host.Host {
	t.Helper()
	c := host.Config{Ephemeral: true, NoAnnounce: true, Key: testKey, Logger: quietLogger()}
	if cfg != nil {
		c = *cfg
		c.Ephemeral, c.NoAnnounce = true, true
		if c.Key == nil {
			c.Key = testKey
		}
		if c.Logger == nil {
			c.Logger = quietLogger()
		}
	}
	h, err := host.New(host.Info{Name: "kvtest", Version: "1.2.3", Domain: "kv", License: "MIT", Description: "a key-value store"}, &c)
	if err != nil {
		t.Fatal(err)
	}
	store := &kv{m: map[string]string{}}
	must(t, host.Register(h, "kv.put", func(_ context.Context, in putIn) (struct{}, error) {
		store.mu.Lock()
		defer store.mu.Unlock()
		store.m[in.Key] = in.Value
		return struct{}{}, nil
	}, host.Description("store a value"), host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 1})))
	must(t, host.Register(h, "kv.get", func(_ context.Context, in getIn) (getOut, error) {
		store.mu.Lock()
		defer store.mu.Unlock()
		v, ok := store.m[in.Key]
		if !ok && in.Key == "missing-with-code" {
			return getOut{}, jsonrpc.Errorf(-32004, "no such key %q", in.Key)
		}
		return getOut{Value: v, Found: ok}, nil
	}, host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 0.5}), host.Requires("kv.put"), host.Idempotent()))
	must(t, host.Register(h, "kv.delete", func(_ context.Context, in getIn) (bool, error) {
		store.mu.Lock()
		defer store.mu.Unlock()
		_, ok := store.m[in.Key]
		delete(store.m, in.Key)
		return ok, nil
	}, host.Requires("kv.put")))
	must(t, h.Consumes("crypto.sign"))
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// serve runs h.Serve in the background until the test ends and returns
// once the host is ready.
func serve(t testing.TB, h *host.Host) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.Serve(ctx) }()
	select {
	case <-h.Ready():
	case err := <-errc:
		cancel()
		t.Fatalf("Serve: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("host not ready within 10s")
	}
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-errc })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func socketConfig(t testing.TB) *host.Config {
	dir := t.TempDir()
	return &host.Config{Socket: filepath.Join(dir, "kvtest.sock")}
}

func dialUnix(t testing.TB, path string) *jsonrpc.Client {
	t.Helper()
	c, err := jsonrpc.Dial(context.Background(), "unix", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServeReachesLevel3OverUnixSocket(t *testing.T) {
	h := newKVHost(t, socketConfig(t))
	serve(t, h)
	c := dialUnix(t, h.Addr("unix"))
	in, err := wire.Inspect(context.Background(), c, &wire.InspectOptions{Transport: "unix", ProbeMethods: true})
	if err != nil {
		t.Fatal(err)
	}
	if in.Report.Level != 3 || in.Report.Verified != 3 {
		t.Fatalf("level %d, verified %d; missed: %v; unobserved: %v", in.Report.Level, in.Report.Verified, in.Report.Reasons(), in.Report.Unobserved())
	}
	if in.Announcement == nil || in.Announcement.Verified == nil || !in.Announcement.Verified.MethodsCovered {
		t.Fatalf("announcement does not verify: %+v", in.Announcement)
	}
	if got := in.Announcement.Verified.PublicKey; !bytes.Equal(got.Bytes(), testKey.Public().(ed25519.PublicKey)) {
		t.Errorf("announcement key %x, want the host key", got)
	}
	if len(in.Capabilities.Deviations) != 0 {
		t.Errorf("our own envelope has deviations: %v", in.Capabilities.Deviations)
	}
	if diff := cmp.Diff([]string{"uds"}, in.Capabilities.Transport); diff != "" {
		t.Errorf("transport (-want +got):\n%s", diff)
	}
}

// TestNoAdvertisedMethodAnswersMethodNotFound is the invariant of the
// standard: every advertised method is callable. Each is called with empty
// params over a real socket, mounted and raw methods included.
func TestNoAdvertisedMethodAnswersMethodNotFound(t *testing.T) {
	h := newKVHost(t, socketConfig(t))
	must(t, h.Handle("admin.echo", jsonrpc.HandlerFunc(func(_ context.Context, r *jsonrpc.Request) (any, error) {
		return r.Params, nil
	})))
	must(t, h.Mount(jsonrpc.Map{
		"ipc.list": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { return []string{}, nil }),
	}))
	serve(t, h)
	c := dialUnix(t, h.Addr("unix"))
	var env wire.CapabilitiesList
	must(t, c.Call(context.Background(), "capabilities.list", nil, &env))
	for _, want := range []string{"kv.put", "kv.get", "kv.delete", "admin.echo", "ipc.list", "capabilities.list", "capability.list",
		"primal.capabilities", "identity.get", "health.liveness", "health.readiness", "health.check", "health.drain",
		"chp.describe", "chp.invoke", "chp.replay", "chp.verify", "chp.export", "chp.head", "chp.witness", "chp.log.head"} {
		if !contains(env.Methods, want) {
			t.Errorf("methods lacks %s", want)
		}
	}
	for _, m := range env.Methods {
		err := c.Call(context.Background(), m, struct{}{}, nil)
		if errors.Is(err, jsonrpc.MethodNotFound) {
			t.Errorf("advertised %s answers method not found", m)
		}
	}
	// The undotted aliases are answered but not advertised.
	for _, alias := range []string{"ping", "health", "status", "check"} {
		if contains(env.Methods, alias) {
			t.Errorf("%s advertised", alias)
		}
		if err := c.Call(context.Background(), alias, nil, nil); err != nil {
			t.Errorf("%s: %v", alias, err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestEnvelopeIsDerivedFromTheTable(t *testing.T) {
	h := newKVHost(t, nil)
	env := h.Envelope()
	want := wire.CapabilitiesList{
		Primal:  "kvtest",
		Version: "1.2.3",
		Methods: []string{"capabilities.list", "capability.list", "chp.anchor", "chp.anchors", "chp.describe", "chp.export",
			"chp.head", "chp.head.consistency", "chp.head.inclusion", "chp.invoke", "chp.log.consistency", "chp.log.head",
			"chp.log.inclusion", "chp.replay", "chp.revocations", "chp.revoke", "chp.verify", "chp.witness", "chp.witnesses",
			"health.check", "health.drain", "health.liveness", "health.readiness", "identity.get", "kv.delete", "kv.get", "kv.put", "primal.capabilities"},
		ProvidedCapabilities: []wire.ProvidedCapability{
			{Type: "capabilities", Methods: []string{"list"}},
			{Type: "capability", Methods: []string{"list"}},
			{Type: "chp", Methods: []string{"anchor", "anchors", "describe", "export", "head", "head.consistency", "head.inclusion",
				"invoke", "log.consistency", "log.head", "log.inclusion", "replay", "revocations", "revoke", "verify", "witness", "witnesses"}},
			{Type: "health", Methods: []string{"check", "drain", "liveness", "readiness"}},
			{Type: "identity", Methods: []string{"get"}},
			{Type: "kv", Methods: []string{"delete", "get", "put"}, Description: "a key-value store"},
			{Type: "primal", Methods: []string{"capabilities"}},
		},
		ConsumedCapabilities: []string{"crypto.sign"},
		CostEstimates: map[string]wire.CostEstimate{
			"kv.put": {CPU: "low", LatencyMS: 1},
			"kv.get": {CPU: "low", LatencyMS: 0.5},
		},
		OperationDependencies: map[string][]string{"kv.get": {"kv.put"}, "kv.delete": {"kv.put"}},
		Protocol:              "jsonrpc-2.0",
		Transport:             []string{},
		TransportSecurity:     &wire.TransportSecurity{BTSPVersion: "2.0", CleartextAvailable: true},
	}
	sa := wire.SignAnnouncement(mustIdentity(t), want.Primal, want.Version, want.Methods)
	want.SignedAnnouncement = &sa
	if env.Transport == nil {
		env.Transport = []string{}
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("envelope (-want +got):\n%s", diff)
	}

	// A registration while serving republishes (and re-signs) at once.
	c := h.LocalClient(context.Background())
	defer c.Close()
	must(t, host.Register(h, "kv.count", func(context.Context, struct{}) (int, error) { return 0, nil }))
	var got wire.CapabilitiesList
	must(t, c.Call(context.Background(), "capabilities.list", nil, &got))
	if !contains(got.Methods, "kv.count") {
		t.Fatalf("kv.count not advertised after registration: %v", got.Methods)
	}
	if _, err := wire.VerifyAnnouncement(*got.SignedAnnouncement, got.Primal, got.Version, got.Methods); err != nil {
		t.Errorf("re-signed announcement: %v", err)
	}
}

// TestCapabilitiesListWire pins the exact bytes capabilities.list and
// identity.get answer (golden files; -update rewrites them).
func TestCapabilitiesListWire(t *testing.T) {
	h := newKVHost(t, nil)
	c := h.LocalClient(context.Background())
	defer c.Close()
	for _, m := range []string{"capabilities.list", "identity.get"} {
		var raw json.RawMessage
		must(t, c.Call(context.Background(), m, nil, &raw))
		golden(t, filepath.Join("testdata", m+".golden.json"), raw)
	}
}

func TestRegisterRejects(t *testing.T) {
	h := newKVHost(t, nil)
	ok := func(context.Context, getIn) (string, error) { return "", nil }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"Kv.get", host.Register(h, "Kv.get", ok), `"Kv.get"`},
		{"kv", host.Register(h, "kv", ok), `"kv"`},
		{"kv..get", host.Register(h, "kv..get", ok), `"kv..get"`},
		{"kv.get-all", host.Register(h, "kv.get-all", ok), `"kv.get-all"`},
		{"rpc.discover", host.Register(h, "rpc.discover", ok), "rpc."},
		{"duplicate", host.Register(h, "kv.get", ok), "already registered"},
		{"built-in", host.Register(h, "health.check", ok), "built-in"},
		{"built-in alias", h.Handle("capability.list", jsonrpc.Map{}.Assign(context.Background(), "")), "nil handler"},
		{"bad cost", host.Register(h, "kv.scan", ok, host.Cost(wire.CostEstimate{CPU: "huge"})), "cpu"},
		{"bad requires", host.Register(h, "kv.scan", ok, host.Requires("Scan")), "Requires"},
		{"self requires", host.Register(h, "kv.scan", ok, host.Requires("kv.scan")), "itself"},
		{"bad risk", host.Register(h, "kv.scan", ok, host.Risk("extreme")), "risk"},
		{"scalar params", host.Register(h, "kv.scan", func(context.Context, string) (string, error) { return "", nil }), "params type"},
		{"bad consumes", h.Consumes("crypto"), `"crypto"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %s", tc.err, tc.want)
			}
		})
	}
	if contains(h.Names(), "kv.scan") {
		t.Error("a refused registration is advertised")
	}
}

func TestInvalidParamsNameTheField(t *testing.T) {
	h := newKVHost(t, nil)
	c := h.LocalClient(context.Background())
	defer c.Close()
	for _, tc := range []struct {
		params any
		want   string
	}{
		{nil, "'key'"},
		{map[string]any{"value": "v"}, "'key'"},
		{map[string]any{"key": 7, "value": "v"}, "/key"},
		{map[string]any{"key": "k", "value": "v", "ttl": "soon"}, "/ttl"},
		{map[string]any{"key": "k", "value": "v", "colour": "red"}, "colour"},
		{[]any{"k", "v"}, "args"},
	} {
		err := c.Call(context.Background(), "kv.put", tc.params, nil)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.InvalidParams || !strings.Contains(je.Message, tc.want) {
			t.Errorf("kv.put %v: %v, want -32602 naming %s", tc.params, err, tc.want)
			continue
		}
		// The refusal is a processed invocation: it left evidence.
		var res chp.InvocationResult
		must(t, json.Unmarshal(je.Data, &res))
		if res.Outcome != chp.OutcomeDenied || len(res.EvidenceIDs) == 0 {
			t.Errorf("data: outcome %s, %d evidence ids", res.Outcome, len(res.EvidenceIDs))
		}
	}
}

func TestDirectCallsLeaveEvidence(t *testing.T) {
	h := newKVHost(t, nil)
	c := h.LocalClient(context.Background())
	defer c.Close()
	ctx := context.Background()
	must(t, c.Call(ctx, "kv.put", map[string]any{"key": "a", "value": "1", "_meta": map[string]any{"correlation_id": "corr-1"}}, nil))
	var got getOut
	must(t, c.Call(ctx, "kv.get", map[string]any{"key": "a", "_meta": map[string]any{"correlation_id": "corr-1"}}, &got))
	if diff := cmp.Diff(getOut{Value: "1", Found: true}, got); diff != "" {
		t.Errorf("kv.get (-want +got):\n%s", diff)
	}
	var rep chp.ReplayResult
	must(t, c.Call(ctx, "chp.replay", map[string]any{"correlation_id": "corr-1"}, &rep))
	var types []string
	for _, e := range rep.Events {
		var ev struct {
			EventType    string `json:"event_type"`
			CapabilityID string `json:"capability_id"`
		}
		must(t, json.Unmarshal(e, &ev))
		types = append(types, ev.CapabilityID+" "+ev.EventType)
	}
	want := []string{"kv.put execution_started", "kv.put execution_completed", "kv.get execution_started", "kv.get execution_completed"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("evidence (-want +got):\n%s", diff)
	}
	var v chp.ChainVerification
	must(t, c.Call(ctx, "chp.verify", map[string]any{"correlation_id": "corr-1"}, &v))
	if !v.Valid {
		t.Errorf("chain does not verify: %+v", v)
	}

	// A handler error with a JSON-RPC code keeps its code; the data still
	// carries the InvocationResult.
	err := c.Call(ctx, "kv.get", map[string]any{"key": "missing-with-code"}, nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32004 || je.Message != `no such key "missing-with-code"` {
		t.Fatalf("kv.get missing: %v", err)
	}
	var res chp.InvocationResult
	must(t, json.Unmarshal(je.Data, &res))
	if res.Outcome != chp.OutcomeFailure {
		t.Errorf("outcome %s, want failure", res.Outcome)
	}
}

func TestHealthShapes(t *testing.T) {
	h := newKVHost(t, nil)
	c := h.LocalClient(context.Background())
	defer c.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		method string
		kind   wire.HealthKind
	}{
		{"health.liveness", wire.KindLiveness}, {"ping", wire.KindLiveness}, {"health", wire.KindLiveness},
		{"health.readiness", wire.KindReadiness},
		{"health.check", wire.KindCheck}, {"status", wire.KindCheck}, {"check", wire.KindCheck},
	} {
		var raw json.RawMessage
		must(t, c.Call(ctx, tc.method, nil, &raw))
		r := wire.ReadHealth(tc.kind, raw)
		if !r.Conformant || r.State != wire.HealthUp {
			t.Errorf("%s: %s reads as %+v", tc.method, raw, r)
		}
	}
	var live wire.Liveness
	must(t, c.Call(ctx, "health.liveness", nil, &live))
	if diff := cmp.Diff(wire.NewLiveness("kvtest", "1.2.3", live.UptimeSeconds), live); diff != "" {
		t.Errorf("liveness (-want +got):\n%s", diff)
	}
	var id wire.Identity
	must(t, c.Call(ctx, "identity.get", nil, &id))
	if diff := cmp.Diff(wire.Identity{Primal: "kvtest", Version: "1.2.3", Domain: "kv", License: "MIT"}, id); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}
}

func TestDrain(t *testing.T) {
	cfg := socketConfig(t)
	cfg.TCP = "127.0.0.1:0"
	h := newKVHost(t, cfg)
	release := make(chan struct{})
	entered := make(chan struct{})
	must(t, host.Register(h, "kv.slow", func(ctx context.Context, _ struct{}) (string, error) {
		close(entered)
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}))
	stop := serve(t, h)
	ctx := context.Background()
	c := dialUnix(t, h.Addr("unix"))

	slow := make(chan error, 1)
	var slowRes string
	go func() { slow <- c.Call(ctx, "kv.slow", nil, &slowRes) }()
	<-entered

	// Drain needs explicit params, and only the host's own user on its
	// socket may ask.
	if err := c.Call(ctx, "health.drain", nil, nil); !errors.Is(err, jsonrpc.InvalidParams) {
		t.Errorf("drain without timeout_ms: %v", err)
	}
	tc, err := jsonrpc.Dial(ctx, "tcp", h.Addr("tcp"), nil)
	must(t, err)
	defer tc.Close()
	if err := tc.Call(ctx, "health.drain", map[string]any{"timeout_ms": 1000}, nil); !errors.Is(err, host.CodeForbidden) {
		t.Errorf("drain over TCP: %v", err)
	}

	var dr host.DrainResult
	must(t, c.Call(ctx, "health.drain", map[string]any{"timeout_ms": 10000}, &dr))
	if diff := cmp.Diff(host.DrainResult{Draining: true, InFlight: 1, TimeoutMS: 10000}, dr); diff != "" {
		t.Errorf("drain result (-want +got):\n%s", diff)
	}
	err = c.Call(ctx, "kv.get", map[string]any{"key": "a"}, nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32000 || je.Message != "Service draining" {
		t.Errorf("call while draining: %v", err)
	}
	var ready wire.Readiness
	must(t, c.Call(ctx, "health.readiness", nil, &ready))
	if ready.Ready || ready.Subsystems["serving"] != "draining" {
		t.Errorf("readiness while draining: %+v", ready)
	}
	must(t, c.Call(ctx, "health.liveness", nil, nil))

	close(release)
	if err := <-slow; err != nil || slowRes != "done" {
		t.Errorf("in-flight call: %q %v", slowRes, err)
	}
	if err := stop(); err != nil {
		t.Errorf("Serve after drain: %v", err)
	}
	if _, err := os.Stat(cfg.Socket); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestServeChecksDependencies(t *testing.T) {
	h := newKVHost(t, socketConfig(t))
	must(t, host.Register(h, "kv.cas", func(context.Context, putIn) (bool, error) { return true, nil }, host.Requires("lock.acquire")))
	err := h.Serve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "kv.cas requires lock.acquire") {
		t.Fatalf("Serve: %v", err)
	}
}

func TestDomainSymlinkAndSocketMode(t *testing.T) {
	cfg := socketConfig(t)
	h := newKVHost(t, cfg)
	serve(t, h)
	fi, err := os.Stat(cfg.Socket)
	must(t, err)
	if fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v", fi.Mode())
	}
	target, err := os.Readlink(filepath.Join(filepath.Dir(cfg.Socket), "kv.sock"))
	must(t, err)
	if target != "kvtest.sock" {
		t.Errorf("kv.sock -> %s", target)
	}
}

func TestDurableStateInDataDir(t *testing.T) {
	dir := t.TempDir()
	info := host.Info{Name: "durable", Version: "0.1.0"}
	cfg := &host.Config{DataDir: dir, NoAnnounce: true, Socket: filepath.Join(t.TempDir(), "d.sock"), Logger: quietLogger()}
	h, err := host.New(info, cfg)
	must(t, err)
	pub := h.PublicKey()
	must(t, host.Register(h, "echo.say", func(_ context.Context, in getIn) (string, error) { return in.Key, nil }))
	c := h.LocalClient(context.Background())
	must(t, c.Call(context.Background(), "echo.say", map[string]any{"key": "x", "_meta": map[string]any{"correlation_id": "c1"}}, nil))
	rev, err := chp.SignMandateRevocation("principal", "mnd_1", "2026-01-01T00:00:00Z", "", ed25519.NewKeyFromSeed(make([]byte, 32)))
	must(t, err)
	must(t, c.Call(context.Background(), "chp.revoke", json.RawMessage(rev), nil))
	// A one-use mandate, spent before the restart.
	now := time.Now().UTC()
	once, err := chp.SignMandate(chp.MandateGrant{PrincipalID: "principal", DelegateID: "anyone", Scope: []string{"echo.say"},
		ValidFrom: chp.FormatTime(now.Add(-time.Minute)), ValidUntil: chp.FormatTime(now.Add(time.Hour)),
		CreatedAt: chp.FormatTime(now.Add(-time.Minute)), MaxInvocations: 1}, ed25519.NewKeyFromSeed(make([]byte, 32)), nil)
	must(t, err)
	mandated := func(b *boundary.Boundary) *chp.InvocationResult {
		res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "echo.say",
			Payload: json.RawMessage(`{"key":"x"}`), Mandate: once})
		must(t, err)
		return res
	}
	if res := mandated(h.Boundary()); res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("mandated call: %+v", res.Denial)
	}
	c.Close()
	must(t, h.Close())
	for _, p := range []string{"keys/durable.pem", "evidence/durable/evidence.log", "mandates/durable.revocations.jsonl"} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v", p, fi.Mode().Perm())
		}
	}
	// A restart keeps the key and the evidence.
	h2, err := host.New(info, cfg)
	must(t, err)
	defer h2.Close()
	if !h2.PublicKey().Equal(pub) {
		t.Error("key changed across restarts")
	}
	rep, err := h2.Boundary().Replay(context.Background(), chp.ReplayQuery{CorrelationID: "c1"})
	must(t, err)
	if rep.EventCount != 2 {
		t.Errorf("replayed %d events after restart, want 2", rep.EventCount)
	}
	if n := len(h2.Boundary().Revocations().Mandates); n != 1 {
		t.Errorf("%d mandate revocations after restart, want 1", n)
	}
	must(t, host.Register(h2, "echo.say", func(_ context.Context, in getIn) (string, error) { return in.Key, nil }))
	if res := mandated(h2.Boundary()); res.Denial == nil || res.Denial.Code != chp.CodeMandateExhausted {
		t.Errorf("a spent mandate after restart: %+v", res)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		info host.Info
		cfg  host.Config
		want string
	}{
		{host.Info{Name: "Bad Name", Version: "1.0.0"}, host.Config{}, "Info.Name"},
		{host.Info{Name: "ok", Version: ""}, host.Config{}, "Info.Version"},
		// What the audit's L2.version fails is refused at once (issue 17).
		{host.Info{Name: "ok", Version: "1.0"}, host.Config{}, "Info.Version"},
		{host.Info{Name: "ok", Version: "v1.0.0"}, host.Config{}, "Info.Version"},
		{host.Info{Name: "ok", Version: "dev"}, host.Config{}, "Info.Version"},
		{host.Info{Name: "ok", Version: "1.0.0", Domain: "a.b"}, host.Config{}, "Info.Domain"},
		{host.Info{Name: "ok", Version: "1.0.0"}, host.Config{NoSocket: true}, "NoSocket"},
		{host.Info{Name: "ok", Version: "1.0.0"}, host.Config{Key: ed25519.PrivateKey{1, 2}}, "Config.Key"},
	} {
		tc.cfg.Ephemeral = tc.cfg.Key == nil
		_, err := host.New(tc.info, &tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want an error naming %s", tc.info, err, tc.want)
		}
	}
}

func TestHTTPServesBridgeAndCHPBinding(t *testing.T) {
	cfg := socketConfig(t)
	cfg.HTTP = "127.0.0.1:0"
	h := newKVHost(t, cfg)
	serve(t, h)
	base := "http://" + h.Addr("http")
	hc := jhttp.NewClient(base+"/jsonrpc", nil)
	defer hc.Close()
	var env wire.CapabilitiesList
	must(t, hc.Call(context.Background(), "capabilities.list", nil, &env))
	if diff := cmp.Diff([]string{"uds", "http"}, env.Transport); diff != "" {
		t.Errorf("transport (-want +got):\n%s", diff)
	}
	res, err := httpGet(base + "/host")
	must(t, err)
	var hd chp.HostDescriptor
	must(t, json.Unmarshal(res, &hd))
	if hd.ID != "kvtest" || len(hd.Capabilities) != 3 {
		t.Errorf("/host: id %q, %d capabilities", hd.ID, len(hd.Capabilities))
	}
}

func mustIdentity(t testing.TB) *identityKey {
	t.Helper()
	k, err := newIdentityKey(testKey.Seed())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ExampleRegister() {
	h, err := host.New(host.Info{Name: "hasher", Version: "1.0.0", Domain: "hash"}, &host.Config{Ephemeral: true, NoAnnounce: true, Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	type in struct {
		Text string `json:"text" jsonschema:"the text to measure"`
	}
	err = host.Register(h, "hash.length", func(_ context.Context, in in) (int, error) {
		return len(in.Text), nil
	}, host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 0.1}))
	if err != nil {
		panic(err)
	}

	c := h.LocalClient(context.Background())
	defer c.Close()
	var n int
	err = c.Call(context.Background(), "hash.length", map[string]string{"text": "capmesh"}, &n)
	fmt.Println(n, err)
	err = c.Call(context.Background(), "hash.length", map[string]int{"text": 7}, nil)
	fmt.Println(int(err.(*jsonrpc.Error).Code), err.(*jsonrpc.Error).Message)
	// Output:
	// 7 <nil>
	// -32602 Invalid params: at /text: got number, want string
}

// TestDescriptorsValidate pins a bug found by the audit: every CHP object
// the host emits for its capabilities must validate against the CHP
// schemas (Idempotent once produced an idempotency value the schema
// forbids).
func TestDescriptorsValidate(t *testing.T) {
	h := newKVHost(t, nil)
	d := h.Boundary().Describe()
	if err := schema.Validate("host-descriptor", d); err != nil {
		t.Fatalf("host descriptor: %v", err)
	}
	for _, c := range d.Capabilities {
		if err := schema.Validate("capability-descriptor", c); err != nil {
			t.Errorf("%s: %v", c.ID, err)
		}
		if c.ID == "kv.get" && !strings.Contains(string(c.Metadata), `"idempotent":true`) {
			t.Errorf("kv.get metadata %s lacks idempotent", c.Metadata)
		}
	}
}
