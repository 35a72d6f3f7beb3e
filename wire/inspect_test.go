package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/jsonrpc"
)

// fakeHost serves methods with the real jsonrpc server on a Unix socket
// and returns a connected client; both stop at the end of the test.
func fakeHost(t *testing.T, a jsonrpc.Assigner) jsonrpc.Caller {
	t.Helper()
	path := filepath.Join(t.TempDir(), "h.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := jsonrpc.NewServer(a, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, l) }()
	c, err := jsonrpc.Dial(context.Background(), "unix", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		cancel()
		wg.Wait()
	})
	return c
}

// raw answers s. The recorded files are indented, and the server writes a
// json.RawMessage as is, so the result is compacted to keep it on one line.
func raw(s string) jsonrpc.Handler {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(err)
	}
	return jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return json.RawMessage(b.Bytes()), nil
	})
}

// primalHost answers a recorded capabilities.list result, conformant
// identity and health, and — when callable — every method it advertises.
type primalHost struct {
	result   json.RawMessage
	identity string
	callable map[string]bool
	fixed    jsonrpc.Map
}

func (h *primalHost) Assign(_ context.Context, method string) jsonrpc.Handler {
	if f, ok := h.fixed[method]; ok {
		return f
	}
	switch method {
	case MethodCapabilitiesList:
		return raw(string(h.result))
	case MethodIdentityGet:
		return raw(h.identity)
	case MethodHealthLiveness:
		return raw(`{"status":"alive"}`)
	case MethodHealthReadiness:
		return raw(`{"status":"ready"}`)
	case MethodHealthCheck:
		return raw(`{"status":"healthy"}`)
	}
	if h.callable[method] {
		return jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "missing params")
		})
	}
	return nil
}

// TestInspectRealResponses serves each recorded primal over a real socket:
// with live identity and health and every method probed, the verified
// level equals the static one.
func TestInspectRealResponses(t *testing.T) {
	for _, tt := range []struct {
		file  string
		level int
	}{
		{"rhizocrypt.capabilities.list.json", 3},
		{"sweetgrass.capabilities.list.json", 3},
		{"loamspine.capabilities.list.json", 2},
		{"nestgate.capabilities.list.json", 1},
		{"nestgate.semantic_router.capabilities.list.json", 1},
		{"songbird.capabilities.list.json", 1},
	} {
		t.Run(tt.file, func(t *testing.T) {
			result := resultOf(t, ecoFile(t, "real-responses/"+tt.file))
			c, err := Parse(result)
			if err != nil {
				t.Fatal(err)
			}
			h := &primalHost{result: result, callable: map[string]bool{}}
			h.identity = `{"primal":"` + c.Primal + `","version":"` + c.Version + `"}`
			for _, m := range advertisedMethods(c) {
				h.callable[m] = true
			}
			in, err := Inspect(context.Background(), fakeHost(t, h), &InspectOptions{Transport: "unix", ProbeMethods: true})
			if err != nil {
				t.Fatal(err)
			}
			if in.Method != MethodCapabilitiesList || in.Capabilities == nil {
				t.Fatalf("Method %q, Capabilities %v", in.Method, in.Capabilities)
			}
			if in.Report.Level != tt.level || in.Report.Verified != tt.level {
				t.Errorf("level %d verified %d, want %d; missed %v unknown %v", in.Report.Level, in.Report.Verified, tt.level, in.Report.Reasons(), in.Report.Unobserved())
			}
			if len(in.Probe.MethodNotFound) != 0 {
				t.Errorf("method not found: %v", in.Probe.MethodNotFound)
			}
			if in.Identity == nil || in.Identity.Primal != c.Primal {
				t.Errorf("identity %+v", in.Identity)
			}
			for _, m := range healthMethods {
				if r := in.Health[m]; r.State != HealthUp || !r.Conformant {
					t.Errorf("%s read as %+v", m, r)
				}
			}
		})
	}
}

func TestInspectFallbacksAndFailures(t *testing.T) {
	caps := `{"primal":"demo","version":"1.0.0","methods":["a.b","c.d"]}`
	t.Run("alias capability.list", func(t *testing.T) {
		h := &primalHost{identity: `{"primal":"demo","version":"1.0.0"}`, fixed: jsonrpc.Map{
			MethodCapabilitiesList: jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { return nil, jsonrpc.MethodNotFound }),
			"capability.list":      raw(caps),
		}}
		in, err := Inspect(context.Background(), fakeHost(t, h), nil)
		if err != nil {
			t.Fatal(err)
		}
		if in.Method != "capability.list" || in.Capabilities == nil || len(in.Capabilities.Methods) != 2 {
			t.Errorf("Method %q caps %+v", in.Method, in.Capabilities)
		}
		if in.Probe.Transport != "" || in.Report.Checks[0].Status != Unknown {
			t.Errorf("transport not given but L1.responds is %v", in.Report.Checks[0].Status)
		}
	})
	t.Run("no capabilities.list at all", func(t *testing.T) {
		h := &primalHost{identity: `{}`, fixed: jsonrpc.Map{
			MethodCapabilitiesList: jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { return nil, jsonrpc.MethodNotFound }),
		}}
		in, err := Inspect(context.Background(), fakeHost(t, h), &InspectOptions{Transport: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		if in.Method != "" || in.Report.Level != 0 {
			t.Fatalf("method %q level %d", in.Method, in.Report.Level)
		}
		if got := in.Report.Missed()[0].Reason; !strings.Contains(got, "none of capabilities.list, capability.list, primal.capabilities answered: Method not found") {
			t.Errorf("L1.responds reason %q", got)
		}
	})
	t.Run("internal error stops the alias search", func(t *testing.T) {
		calls := 0
		h := &primalHost{identity: `{}`, fixed: jsonrpc.Map{
			MethodCapabilitiesList: jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { calls++; return nil, errors.New("boom") }),
			"capability.list":      jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { calls++; return json.RawMessage(caps), nil }),
		}}
		in, err := Inspect(context.Background(), fakeHost(t, h), nil)
		if err != nil {
			t.Fatal(err)
		}
		if calls != 1 || in.Capabilities != nil || !errors.Is(in.Probe.CapabilitiesErr, jsonrpc.InternalError) {
			t.Errorf("calls %d caps %v err %v", calls, in.Capabilities, in.Probe.CapabilitiesErr)
		}
	})
	t.Run("a string result is not capabilities", func(t *testing.T) {
		h := &primalHost{result: json.RawMessage(`"ok"`), identity: `{}`}
		in, err := Inspect(context.Background(), fakeHost(t, h), nil)
		if err != nil {
			t.Fatal(err)
		}
		if in.Capabilities != nil || !errors.Is(in.Probe.CapabilitiesErr, ErrNotCapabilities) || in.Report.Level != 0 {
			t.Errorf("caps %v err %v level %d", in.Capabilities, in.Probe.CapabilitiesErr, in.Report.Level)
		}
	})
	t.Run("method not found during probing", func(t *testing.T) {
		h := &primalHost{result: json.RawMessage(caps), identity: `{"primal":"demo","version":"1.0.0"}`, callable: map[string]bool{"a.b": true}}
		in, err := Inspect(context.Background(), fakeHost(t, h), &InspectOptions{ProbeMethods: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(in.Probe.MethodNotFound) != 1 || in.Probe.MethodNotFound[0] != "c.d" {
			t.Errorf("MethodNotFound %v", in.Probe.MethodNotFound)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "h.sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		defer l.Close()
		c, err := jsonrpc.Dial(context.Background(), "unix", path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := Inspect(context.Background(), c, nil); err == nil {
			t.Error("Inspect succeeded over a closed connection")
		}
	})
	t.Run("slow host times out per call", func(t *testing.T) {
		h := &primalHost{identity: `{}`, fixed: jsonrpc.Map{
			MethodCapabilitiesList: jsonrpc.HandlerFunc(func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}),
		}}
		start := time.Now()
		_, err := Inspect(context.Background(), fakeHost(t, h), &InspectOptions{CallTimeout: 100 * time.Millisecond})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v, want a deadline", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Error("per-call timeout not applied")
		}
	})
}

func TestInspectSignedAnnouncement(t *testing.T) {
	key := identity.DeriveEcoPrimalsCompat("demo", "node-1")
	methods := []string{"health.liveness", "a.b"}
	sa := SignAnnouncement(key, "demo", "1.0.0", methods)
	for _, tt := range []struct {
		name    string
		version string
		ok      bool
	}{{"valid", "1.0.0", true}, {"version changed after signing", "1.0.1", false}} {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := json.Marshal(CapabilitiesList{Primal: "demo", Version: tt.version, Methods: methods, SignedAnnouncement: &sa})
			in, err := Inspect(context.Background(), fakeHost(t, &primalHost{result: b, identity: `{}`}), nil)
			if err != nil {
				t.Fatal(err)
			}
			a := in.Announcement
			if a == nil {
				t.Fatal("no announcement check")
			}
			if (a.Verified != nil) != tt.ok || (a.Err == nil) != tt.ok {
				t.Fatalf("verified %v err %v, want ok=%v", a.Verified, a.Err, tt.ok)
			}
			if tt.ok && !a.Verified.PublicKey.IsEcoPrimalsDerived("demo", "node-1") {
				t.Error("derived key not recognised")
			}
			if !tt.ok && !errors.Is(a.Err, ErrAnnouncementSignature) {
				t.Errorf("err %v", a.Err)
			}
		})
	}
}
