package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/chp/gateway"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
)

// memberHost is a real CHP member: a boundary served by the HTTP binding
// on a loopback listener.
type memberHost struct {
	id    string
	b     *boundary.Boundary
	srv   *httptest.Server
	execs atomic.Int64 // handler executions
	fail  atomic.Int32 // when set, /invoke answers this HTTP status
	down  atomic.Bool  // when set, /host answers 503

	mu     sync.Mutex
	bodies [][]byte // the /invoke bodies it received
}

func newMember(t *testing.T, id string, caps ...string) *memberHost {
	t.Helper()
	b, err := boundary.New(boundary.Config{HostID: id, Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	m := &memberHost{id: id, b: b}
	for _, c := range caps {
		err := b.Register(boundary.Capability{
			Descriptor: chp.CapabilityDescriptor{ID: c, Version: "1.0.0", Description: "mesh fixture " + c},
			Handler: func(_ context.Context, _ json.RawMessage) (json.RawMessage, error) {
				m.execs.Add(1)
				return json.Marshal(map[string]string{"served_by": id})
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	h := chphttp.Handler(b, nil)
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/host" && m.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/invoke" {
			if st := m.fail.Load(); st != 0 {
				http.Error(w, `{"error":{"code":"unavailable","message":"test"}}`, int(st))
				return
			}
			body, _ := io.ReadAll(r.Body)
			m.mu.Lock()
			m.bodies = append(m.bodies, body)
			m.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// kill stops the member: its listener closes, so connections are refused.
func (m *memberHost) kill() { m.srv.Close() }

func (m *memberHost) events(t *testing.T, corr string) []map[string]any {
	t.Helper()
	res, err := m.b.Replay(context.Background(), chp.ReplayQuery{CorrelationID: corr})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(res.Events))
	for i, e := range res.Events {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// mesh is the fixture profile's topology: member a serves mesh.echo and
// mesh.only-a, member b serves mesh.echo, the gateway routes both.
type mesh struct {
	a, b  *memberHost
	store *evidence.Memory
	gw    *gateway.Gateway
	url   string
}

func newMesh(t *testing.T) *mesh {
	t.Helper()
	ms := &mesh{a: newMember(t, "mesh-member-a", "mesh.echo", "mesh.only-a"),
		b: newMember(t, "mesh-member-b", "mesh.echo"), store: evidence.NewMemory()}
	gw, err := gateway.New(gateway.Config{HostID: "gw", Members: []string{ms.a.srv.URL, ms.b.srv.URL},
		Store: ms.store, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := gw.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	ms.gw, ms.url = gw, srv.URL
	return ms
}

func (ms *mesh) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, ms.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: HTTP %d, not JSON: %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func (ms *mesh) invoke(t *testing.T, body string) map[string]any {
	t.Helper()
	status, res := ms.do(t, "POST", "/invoke", body)
	if status != http.StatusOK {
		t.Fatalf("invoke: HTTP %d %v", status, res)
	}
	return res
}

func servedBy(res map[string]any) any {
	d, _ := res["data"].(map[string]any)
	return d["served_by"]
}

func eventTypes(events []map[string]any) []string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprint(e["event_type"]))
	}
	return out
}

// TestMergedDiscovery: /host merges both members' catalogs, each
// capability annotated with every owner (check 1).
func TestMergedDiscovery(t *testing.T) {
	ms := newMesh(t)
	status, host := ms.do(t, "GET", "/host", "")
	if status != http.StatusOK || host["id"] != "gw" {
		t.Fatalf("/host: %d %v", status, host)
	}
	hosts := map[string][]any{}
	for _, c := range host["capabilities"].([]any) {
		c := c.(map[string]any)
		hosts[c["id"].(string)] = c["hosts"].([]any)
	}
	if got := fmt.Sprint(hosts["mesh.echo"]); got != "[mesh-member-a mesh-member-b]" {
		t.Errorf("mesh.echo owners %s", got)
	}
	if got := fmt.Sprint(hosts["mesh.only-a"]); got != "[mesh-member-a]" {
		t.Errorf("mesh.only-a owners %s", got)
	}
	_, caps := ms.do(t, "GET", "/capabilities", "")
	if n := len(caps["capabilities"].([]any)); n != 2 {
		t.Errorf("/capabilities lists %d, want 2", n)
	}
}

// TestRoutedInvocationKeepsCorrelation: a routed invocation succeeds and the
// caller's correlation and invocation id are the member's (check 2).
func TestRoutedInvocationKeepsCorrelation(t *testing.T) {
	ms := newMesh(t)
	res := ms.invoke(t, `{"capability_id":"mesh.echo","invocation_id":"inv-routed","correlation":{"correlation_id":"c-routed"}}`)
	if res["outcome"] != "success" || servedBy(res) != "mesh-member-a" {
		t.Fatalf("routed invoke: %v", res)
	}
	evs := ms.a.events(t, "c-routed")
	if !slices.Contains(eventTypes(evs), chp.EventCompleted) || evs[0]["invocation_id"] != "inv-routed" {
		t.Errorf("member evidence under the caller's correlation: %v", evs)
	}
	// The convenience form (no ids at all) still shares one correlation
	// between the answer and the member's chain.
	res = ms.invoke(t, `{"capability_id":"mesh.echo","correlation_id":"c-lifted"}`)
	if len(ms.a.events(t, "c-lifted")) == 0 || res["correlation"].(map[string]any)["correlation_id"] != "c-lifted" {
		t.Errorf("lifted correlation did not reach the member: %v", res)
	}
}

// TestMandateForwardedUnchanged: a presented mandate reaches the member
// byte for byte, whether the gateway forwards the caller's body as is or
// adds the ids it minted (check 3, §10 Forwarding).
func TestMandateForwardedUnchanged(t *testing.T) {
	ms := newMesh(t)
	mandate := `{"principal" : "p",  "delegate_id":"d","scope":["mesh.echo"],"signature":{"sig":"\u00e9x"}}`
	for _, body := range []string{
		`{"capability_id":"mesh.echo","invocation_id":"inv-m","correlation":{"correlation_id":"c-m"},"mandate":` + mandate + `}`,
		`{"capability_id":"mesh.echo","mandate":` + mandate + `}`,
	} {
		ms.invoke(t, body)
		ms.a.mu.Lock()
		got := ms.a.bodies[len(ms.a.bodies)-1]
		ms.a.mu.Unlock()
		if !bytes.Contains(got, []byte(`"mandate":`+mandate)) {
			t.Errorf("the member received %s, want the mandate %s unchanged", got, mandate)
		}
	}
}

// TestExportAssemblesTaskBundle: /export fans out to both members and
// assembles a task bundle whose members verify, sorted, with the task root
// hash over their roots (check 4).
func TestExportAssemblesTaskBundle(t *testing.T) {
	ms := newMesh(t)
	ms.invoke(t, `{"capability_id":"mesh.only-a","correlation":{"correlation_id":"c-x"}}`)
	res := ms.invoke(t, `{"capability_id":"mesh.echo","correlation":{"correlation_id":"c-x"},"metadata":{"prefer":"`+ms.b.srv.URL+`/"}}`)
	if servedBy(res) != "mesh-member-b" {
		t.Fatalf("metadata.prefer ignored: %v", res)
	}
	resp, err := http.Get(ms.url + "/export/c-x")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var task struct {
		Kind, CorrelationID, Assurance string
		TaskRootHash                   string            `json:"task_root_hash"`
		Bundles                        []json.RawMessage `json:"bundles"`
	}
	if err := json.Unmarshal(raw, &task); err != nil || resp.StatusCode != 200 {
		t.Fatalf("export: %d %s", resp.StatusCode, raw)
	}
	if task.Kind != "task-bundle" || len(task.Bundles) != 2 || task.Assurance != "hash-chain" {
		t.Fatalf("task bundle: %s", raw)
	}
	h := sha256.New()
	var ids []string
	for _, b := range task.Bundles {
		v, err := chp.VerifyBundle(b, nil)
		if err != nil || !v.Valid {
			t.Errorf("member bundle does not verify: %v %+v", err, v)
		}
		ids = append(ids, v.HostID)
		var m struct {
			RootHash string `json:"root_hash"`
		}
		_ = json.Unmarshal(b, &m)
		h.Write([]byte(m.RootHash + "\n"))
	}
	if fmt.Sprint(ids) != "[mesh-member-a mesh-member-b]" {
		t.Errorf("members %v, want both, sorted", ids)
	}
	if task.TaskRootHash != hex.EncodeToString(h.Sum(nil)) {
		t.Errorf("task_root_hash %s does not recompute", task.TaskRootHash)
	}
	if v, err := gateway.VerifyTaskBundle(raw); err != nil || !v.Valid {
		t.Errorf("VerifyTaskBundle: %v %+v", err, v)
	}
	status, fed := ms.do(t, "GET", "/verify/c-x", "")
	if status != 200 || fed["mode"] != "federated" || fed["valid"] != true || len(fed["hosts"].([]any)) != 2 {
		t.Errorf("federated /verify: %d %v", status, fed)
	}
}

// TestVerifyTaskBundleRejectsTampering: a task bundle verifies only as
// assembled — reordered, re-rooted, duplicated, edited members and a
// causation pointing outside the task each fail their named check.
func TestVerifyTaskBundleRejectsTampering(t *testing.T) {
	ms := newMesh(t)
	ms.invoke(t, `{"capability_id":"mesh.only-a","invocation_id":"inv-root","correlation":{"correlation_id":"c-t"}}`)
	ms.invoke(t, `{"capability_id":"mesh.echo","correlation":{"correlation_id":"c-t","causation_id":"inv-root"},"metadata":{"prefer":"`+ms.b.srv.URL+`"}}`)
	ms.invoke(t, `{"capability_id":"mesh.echo","correlation":{"correlation_id":"c-dangling","causation_id":"inv-elsewhere"}}`)
	export := func(corr string) map[string]json.RawMessage {
		resp, err := http.Get(ms.url + "/export/" + corr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var task map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&task); err != nil {
			t.Fatal(err)
		}
		return task
	}
	verify := func(task map[string]json.RawMessage) *gateway.TaskVerification {
		raw, _ := json.Marshal(task)
		v, err := gateway.VerifyTaskBundle(raw)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := verify(export("c-t")); !v.Valid {
		t.Fatalf("cross-host causation within the task: %+v", v)
	}
	if v := verify(export("c-dangling")); v.Valid || v.Checks["causal_closure"] {
		t.Errorf("dangling causation verified: %+v", v)
	}
	var members []json.RawMessage
	task := export("c-t")
	_ = json.Unmarshal(task["bundles"], &members)
	edited := json.RawMessage(strings.Replace(string(members[0]), `"timestamp":"2`, `"timestamp":"1`, 1))
	if bytes.Equal(edited, members[0]) {
		t.Fatalf("no timestamp to edit in %s", members[0])
	}
	for name, c := range map[string]struct {
		bundles []json.RawMessage
		root    string
	}{
		"member_order":   {[]json.RawMessage{members[1], members[0]}, ""},
		"task_root_hash": {members, `"` + strings.Repeat("0", 64) + `"`},
		"distinct_hosts": {[]json.RawMessage{members[0], members[0]}, ""},
		"members_valid":  {[]json.RawMessage{edited, members[1]}, ""},
	} {
		tampered := map[string]json.RawMessage{}
		for k, v := range task {
			tampered[k] = v
		}
		tampered["bundles"], _ = json.Marshal(c.bundles)
		if c.root != "" {
			tampered["task_root_hash"] = json.RawMessage(c.root)
		}
		if v := verify(tampered); v.Valid || v.Checks[name] {
			t.Errorf("%s: tampered task bundle verified: %+v", name, v)
		}
	}
}

// TestFailoverReplayAndExportWithAKilledMember kills member a and walks
// checks 5–8: the co-owned capability fails over to b, the solely owned one
// is a processed host_unreachable denial, the stitched replay discloses the
// missing member and merges the gateway's own health transition, and
// /export refuses with 503 naming the member.
func TestFailoverReplayAndExportWithAKilledMember(t *testing.T) {
	ms := newMesh(t)
	ms.invoke(t, `{"capability_id":"mesh.only-a","correlation":{"correlation_id":"c-before"}}`)
	ms.a.kill()

	res := ms.invoke(t, `{"capability_id":"mesh.echo","correlation":{"correlation_id":"c-down"}}`)
	if res["outcome"] != "success" || servedBy(res) != "mesh-member-b" {
		t.Fatalf("failover: %v", res)
	}

	res = ms.invoke(t, `{"capability_id":"mesh.only-a","correlation":{"correlation_id":"c-down"}}`)
	d, _ := res["denial"].(map[string]any)
	if res["outcome"] != "denied" || d["code"] != "host_unreachable" || d["retryable"] != true {
		t.Fatalf("want a processed host_unreachable denial, got %v", res)
	}
	details, _ := d["details"].(map[string]any)
	if fmt.Sprint(details["attempted_hosts"]) != "["+ms.a.srv.URL+"]" || details["last_error"] == nil {
		t.Errorf("details %v", details)
	}

	status, rep := ms.do(t, "GET", "/replay/c-down", "")
	if status != 200 || rep["partial"] != true || fmt.Sprint(rep["missing_hosts"]) != "["+ms.a.srv.URL+"]" {
		t.Fatalf("replay: %d %v", status, rep)
	}
	var types []string
	for _, e := range rep["events"].([]any) {
		types = append(types, e.(map[string]any)["event_type"].(string))
	}
	for _, want := range []string{gateway.EventHostUnhealthy, chp.EventDenied, chp.EventCompleted} {
		if !slices.Contains(types, want) {
			t.Errorf("stitched replay %v lacks %s", types, want)
		}
	}
	// The unhealthy mark is transition-gated: one, though a was tried twice.
	if n, _ := ms.store.Count(context.Background(), "c-down", gateway.EventHostUnhealthy); n != 1 {
		t.Errorf("%d host_marked_unhealthy events, want 1", n)
	}
	recs, _ := ms.store.Replay(context.Background(), evidence.Query{CorrelationID: "c-down"})
	var stored []chp.StoredEvent
	for _, r := range recs {
		stored = append(stored, chp.StoredEvent{Sequence: r.Sequence, Data: r.Data, ContentHash: r.ContentHash, PrevHash: r.PrevHash})
	}
	if v := chp.VerifyChain("c-down", stored); !v.Valid || v.VerifiedCount != 2 {
		t.Errorf("the gateway's own chain: %+v", v)
	}

	for _, path := range []string{"/export/c-before", "/verify/c-before"} {
		status, body := ms.do(t, "GET", path, "")
		if status != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(body), ms.a.srv.URL) {
			t.Errorf("%s with a member down: %d %v", path, status, body)
		}
	}
}

// TestExactlyOnceAcrossOwners: a retried client invocation id replays at the
// gateway without reaching an owner, even once every owner is down, while a
// fresh id is host_unreachable and is not cached (check 9, §13.2).
func TestExactlyOnceAcrossOwners(t *testing.T) {
	ms := newMesh(t)
	body := `{"capability_id":"mesh.echo","invocation_id":"inv-once","correlation":{"correlation_id":"c-once"}}`
	r1 := ms.invoke(t, body)
	if r1["outcome"] != "success" || r1["replayed"] != nil {
		t.Fatalf("first: %v", r1)
	}
	r2 := ms.invoke(t, body)
	if r2["replayed"] != true || servedBy(r2) != servedBy(r1) {
		t.Errorf("retry: %v", r2)
	}
	ms.a.kill()
	ms.b.kill()
	if r3 := ms.invoke(t, body); r3["replayed"] != true || servedBy(r3) != "mesh-member-a" {
		t.Errorf("retry with every owner down: %v", r3)
	}
	if n := ms.a.execs.Load() + ms.b.execs.Load(); n != 1 {
		t.Errorf("%d executions, want exactly 1", n)
	}
	fresh := `{"capability_id":"mesh.echo","invocation_id":"inv-fresh","correlation":{"correlation_id":"c-once"}}`
	for range 2 { // a host_unreachable denial is retryable: never cached
		f := ms.invoke(t, fresh)
		if d, _ := f["denial"].(map[string]any); f["replayed"] != nil || d["code"] != "host_unreachable" {
			t.Errorf("fresh id: %v", f)
		}
	}
}

// TestUnknownCapabilityAndBadEnvelope: a capability no member serves is a
// processed capability_not_found denial; a malformed envelope is a 400.
func TestUnknownCapabilityAndBadEnvelope(t *testing.T) {
	ms := newMesh(t)
	res := ms.invoke(t, `{"capability_id":"mesh.nowhere"}`)
	if d, _ := res["denial"].(map[string]any); res["outcome"] != "denied" || d["code"] != "capability_not_found" {
		t.Errorf("unknown capability: %v", res)
	}
	if status, _ := ms.do(t, "POST", "/invoke", `{"capability_id":"mesh.echo","payload":[1]}`); status != http.StatusBadRequest {
		t.Errorf("bad envelope: HTTP %d", status)
	}
}

// TestUnavailableStatusFailsOverAndRecovers: a member answering 503 is
// unreachable (failover, host_marked_unhealthy), its next success marks it
// healthy again on the invocation's correlation, and a 500 — after which
// the work may have run — is passed through, never failed over.
func TestUnavailableStatusFailsOverAndRecovers(t *testing.T) {
	ms := newMesh(t)
	ctx := context.Background()
	ms.a.fail.Store(http.StatusServiceUnavailable)
	if res := ms.invoke(t, `{"capability_id":"mesh.echo","correlation":{"correlation_id":"c-503"}}`); servedBy(res) != "mesh-member-b" {
		t.Fatalf("503 did not fail over: %v", res)
	}
	if n, _ := ms.store.Count(ctx, "c-503", gateway.EventHostUnhealthy); n != 1 {
		t.Errorf("%d host_marked_unhealthy, want 1", n)
	}
	ms.a.fail.Store(0)
	if res := ms.invoke(t, `{"capability_id":"mesh.only-a","correlation":{"correlation_id":"c-back"}}`); res["outcome"] != "success" {
		t.Fatalf("recovered member: %v", res)
	}
	if n, _ := ms.store.Count(ctx, "c-back", gateway.EventHostHealthy); n != 1 {
		t.Errorf("%d host_marked_healthy, want 1", n)
	}
	ms.a.fail.Store(http.StatusInternalServerError)
	before := ms.b.execs.Load()
	if status, _ := ms.do(t, "POST", "/invoke", `{"capability_id":"mesh.echo"}`); status != http.StatusInternalServerError {
		t.Errorf("a member's 500 answered HTTP %d, want it passed through", status)
	}
	if ms.b.execs.Load() != before {
		t.Error("a member's 500 failed over to another owner")
	}
}

// TestCallerKeys: a gateway with keys refuses callers without one.
func TestCallerKeys(t *testing.T) {
	a := newMember(t, "a", "mesh.echo")
	gw, err := gateway.New(gateway.Config{Members: []string{a.srv.URL}, Keys: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	for key, want := range map[string]int{"": 401, "wrong": 401, "k": 200} {
		req, _ := http.NewRequest("GET", srv.URL+"/host", nil)
		if key != "" {
			req.Header.Set("X-CHP-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("key %q: HTTP %d, want %d", key, resp.StatusCode, want)
		}
	}
}

// TestNewRejectsBadMembers: member URLs are checked at construction.
func TestNewRejectsBadMembers(t *testing.T) {
	for _, m := range [][]string{nil, {"ftp://x"}, {"127.0.0.1:1"}, {"http://a", "http://a/"}, {"http://u:p@a"}} {
		if _, err := gateway.New(gateway.Config{Members: m}); err == nil {
			t.Errorf("members %q accepted", m)
		}
	}
}

// TestLateMemberIsDiscovered: a member whose /host fails at Discover is
// left out of the table and discovered by a later /host or /invoke, once
// Config.Rediscover has passed since the last attempt.
func TestLateMemberIsDiscovered(t *testing.T) {
	a, b := newMember(t, "a", "mesh.echo"), newMember(t, "b", "mesh.only-b")
	b.down.Store(true)
	var clock atomic.Int64 // seconds past an epoch
	now := func() time.Time { return time.Unix(1_700_000_000+clock.Load(), 0) }
	gw, err := gateway.New(gateway.Config{Members: []string{a.srv.URL, b.srv.URL}, Now: now, Rediscover: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Discover(context.Background()); err == nil || !strings.Contains(err.Error(), b.srv.URL) {
		t.Errorf("Discover: %v, want an error naming %s", err, b.srv.URL)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	ms := &mesh{url: srv.URL}
	res := ms.invoke(t, `{"capability_id":"mesh.only-b"}`)
	if d, _ := res["denial"].(map[string]any); d["code"] != "capability_not_found" {
		t.Errorf("undiscovered owner: %v", res)
	}
	b.down.Store(false)
	// Within Rediscover the member is left alone: no request waits on it.
	if res := ms.invoke(t, `{"capability_id":"mesh.only-b"}`); servedBy(res) == "b" {
		t.Errorf("member rediscovered within Rediscover: %v", res)
	}
	clock.Add(61)
	if res := ms.invoke(t, `{"capability_id":"mesh.only-b"}`); servedBy(res) != "b" {
		t.Errorf("late member not routed: %v", res)
	}
}

// TestStreamingIsNotRelayed: mode "stream" is a processed unsupported_mode
// denial at the gateway, recorded on its chain; no member is reached.
func TestStreamingIsNotRelayed(t *testing.T) {
	ms := newMesh(t)
	res := ms.invoke(t, `{"capability_id":"mesh.echo","mode":"stream","correlation_id":"c-s"}`)
	if d, _ := res["denial"].(map[string]any); res["outcome"] != "denied" || d["code"] != "unsupported_mode" {
		t.Errorf("stream: %v", res)
	}
	if n, _ := ms.store.Count(context.Background(), "c-s", chp.EventDenied); n != 1 || ms.a.execs.Load()+ms.b.execs.Load() != 0 {
		t.Errorf("%d denial events, %d executions", n, ms.a.execs.Load()+ms.b.execs.Load())
	}
}

// TestExactlyOnceAcrossGatewayRestart: with a durable store the cache
// outlives the gateway — a restarted gateway replays a served id with every
// owner down — and the gateway's evidence goes to that store.
func TestExactlyOnceAcrossGatewayRestart(t *testing.T) {
	a := newMember(t, "a", "mesh.echo")
	dir := t.TempDir()
	start := func() (*logstore.Store, string, func()) {
		store, err := logstore.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(gateway.Config{Members: []string{a.srv.URL}, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		_ = gw.Discover(context.Background())
		srv := httptest.NewServer(gw.Handler())
		return store, srv.URL, func() { srv.Close(); _ = store.Close() }
	}
	_, u, stop := start()
	ms := &mesh{url: u}
	body := `{"capability_id":"mesh.echo","invocation_id":"inv-durable","correlation":{"correlation_id":"c-r"}}`
	if res := ms.invoke(t, body); res["outcome"] != "success" {
		t.Fatalf("first: %v", res)
	}
	stop()
	a.kill()

	store, u, stop := start()
	defer stop()
	ms = &mesh{url: u}
	if res := ms.invoke(t, body); res["replayed"] != true || servedBy(res) != "a" {
		t.Errorf("after a gateway restart: %v", res)
	}
	// a was down when this gateway started: nothing routes mesh.echo, and
	// the denial lands in the durable store.
	res := ms.invoke(t, `{"capability_id":"mesh.echo","correlation":{"correlation_id":"c-r"}}`)
	if d, _ := res["denial"].(map[string]any); d["code"] != "capability_not_found" {
		t.Errorf("fresh id, no owner discovered: %v", res)
	}
	if n, _ := store.Count(context.Background(), "c-r", chp.EventDenied); n != 1 {
		t.Errorf("%d execution_denied in the durable store, want 1", n)
	}
}

// TestDenialRecordsSubjectAsClaim: the gateway's own execution_denied
// event keeps the caller's envelope subject as a claim — a caller that
// sends {"id":"admin","verified":true} must not get "verified":true into
// the gateway's evidence (the gateway authenticates no subject).
func TestDenialRecordsSubjectAsClaim(t *testing.T) {
	ms := newMesh(t)
	res := ms.invoke(t, `{"capability_id":"mesh.nowhere","correlation":{"correlation_id":"forged-subj"},"subject":{"id":"admin","type":"operator","verified":true}}`)
	if res["outcome"] != "denied" {
		t.Fatalf("unknown capability: %v", res)
	}
	recs, err := ms.store.Replay(context.Background(), evidence.Query{CorrelationID: "forged-subj"})
	if err != nil || len(recs) == 0 {
		t.Fatalf("replay: %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		var ev struct {
			Subject map[string]any `json:"subject"`
		}
		if err := json.Unmarshal(r.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Subject["verified"] != false || ev.Subject["id"] != "admin" {
			t.Errorf("%s recorded the caller's subject as %v", r.EventType, ev.Subject)
		}
	}
}

// TestCachedResultOnlyForTheSameRequest: the exactly-once cache replays a
// result only to the same request (capability, version, mode, payload,
// subject) under that invocation id. Another caller reusing a seen
// invocation_id with another request must not be handed the first
// caller's result.
func TestCachedResultOnlyForTheSameRequest(t *testing.T) {
	ms := newMesh(t)
	first := ms.invoke(t, `{"capability_id":"mesh.only-a","invocation_id":"inv_victim","correlation_id":"c-victim","payload":{"secret":1}}`)
	if first["outcome"] != "success" {
		t.Fatalf("first: %v", first)
	}
	again := ms.invoke(t, `{"capability_id":"mesh.only-a","invocation_id":"inv_victim","correlation_id":"c-victim","payload":{"secret":1}}`)
	if again["completed_at"] != first["completed_at"] {
		t.Errorf("the same request was not replayed: %v", again)
	}
	other := ms.invoke(t, `{"capability_id":"mesh.echo","invocation_id":"inv_victim","correlation_id":"c-attacker","payload":{"other":2}}`)
	if other["capability_id"] == "mesh.only-a" || other["completed_at"] == first["completed_at"] {
		t.Errorf("another request with the same invocation_id got the first one's result: %v", other)
	}
}

// TestTraceparentPassesThrough: the caller's traceparent header reaches
// the member unchanged, so the member's evidence carries the caller's
// trace id, and the gateway's own events of a traced invocation carry it
// too; a malformed header is dropped.
func TestTraceparentPassesThrough(t *testing.T) {
	ms := newMesh(t)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	post := func(body, tp string) map[string]any {
		req, err := http.NewRequest("POST", ms.url+"/invoke", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Traceparent", tp)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	traceOf := func(ev map[string]any) any { return ev["correlation"].(map[string]any)["trace_id"] }
	post(`{"capability_id":"mesh.only-a","correlation":{"correlation_id":"c-traced"}}`, "00-"+trace+"-00f067aa0ba902b7-01")
	evs := ms.a.events(t, "c-traced")
	if len(evs) == 0 {
		t.Fatal("the member recorded nothing")
	}
	for _, ev := range evs {
		if traceOf(ev) != trace {
			t.Fatalf("member event %v: trace_id %v, want %s", ev["event_type"], traceOf(ev), trace)
		}
	}
	// A denial the gateway records itself.
	post(`{"capability_id":"mesh.nowhere","correlation":{"correlation_id":"c-traced-denied"}}`, "00-"+trace+"-00f067aa0ba902b7-01")
	recs, err := ms.store.Replay(context.Background(), evidence.Query{CorrelationID: "c-traced-denied"})
	if err != nil || len(recs) == 0 {
		t.Fatalf("gateway evidence: %d records, %v", len(recs), err)
	}
	var ev map[string]any
	if err := json.Unmarshal(recs[0].Data, &ev); err != nil {
		t.Fatal(err)
	}
	if traceOf(ev) != trace {
		t.Errorf("gateway denial trace_id %v, want %s", traceOf(ev), trace)
	}
	// A malformed header is dropped: no trace id anywhere.
	post(`{"capability_id":"mesh.only-a","correlation":{"correlation_id":"c-bad-trace"}}`, "00-"+trace+"-0000000000000000-01")
	for _, ev := range ms.a.events(t, "c-bad-trace") {
		if traceOf(ev) != nil {
			t.Fatalf("a malformed traceparent set trace_id %v", traceOf(ev))
		}
	}
}
