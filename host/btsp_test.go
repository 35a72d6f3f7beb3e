package host_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/btsp"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestFamilySocketSpeaksBTSP: a family-scoped host with a seed serves its
// stream listeners over BTSP; in cleartext only discovery and health, and
// anything else gets the Capability Wire Standard's rejection (TS-01),
// with the request's id, before the connection closes; transport_security
// says exactly that.
func TestFamilySocketSpeaksBTSP(t *testing.T) {
	t.Setenv("FAMILY_ID", "fam42")
	t.Setenv("FAMILY_SEED", "seed-of-fam42")
	cfg := socketConfig(t)
	cfg.TCP = "127.0.0.1:0"
	h := newKVHost(t, cfg)
	ts := h.Envelope().TransportSecurity
	if ts == nil || !ts.BTSPRequired || ts.CleartextAvailable || ts.BTSPVersion != "2.0" ||
		!strings.Contains(strings.Join(ts.CleartextMethods, ","), "capabilities.list") {
		t.Fatalf("transport_security %+v", ts)
	}
	serve(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Cleartext: health is served, a capability call refused.
	conn, err := net.Dial("unix", h.Addr("unix"))
	must(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	conn.Write([]byte(`{"jsonrpc":"2.0","method":"health.liveness","id":1}` + "\n"))
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"result"`) {
		t.Fatalf("cleartext health: %q %v", line, err)
	}
	conn.Write([]byte(`{"jsonrpc":"2.0","method":"kv.get","params":{"key":"a"},"id":"x"}` + "\n"))
	line, _ := br.ReadString('\n')
	want := `{"jsonrpc":"2.0","error":{"code":-32600,"message":"BTSP handshake required","data":{"reason":"This socket is family-scoped and requires a BTSP handshake before JSON-RPC traffic.","btsp_version":"2.0"}},"id":"x"}` + "\n"
	if line != want {
		t.Fatalf("rejection\n got %s\nwant %s", line, want)
	}
	if rest, err := br.ReadString('\n'); err == nil || rest != "" {
		t.Fatalf("connection not closed after the rejection: %q %v", rest, err)
	}

	// With the handshake, over the Unix socket and over TCP, everything.
	fam := &btsp.Config{Seed: "seed-of-fam42", FamilyID: "fam42"}
	for _, a := range []struct{ network, addr string }{{"unix", h.Addr("unix")}, {"tcp", h.Addr("tcp")}} {
		bc, err := btsp.Dial(ctx, a.network, a.addr, fam)
		must(t, err)
		c := jsonrpc.NewClient(bc, nil)
		must(t, c.Call(ctx, "kv.put", map[string]any{"key": "a", "value": a.network}, nil))
		var got struct{ Value string }
		must(t, c.Call(ctx, "kv.get", map[string]any{"key": "a", "_meta": map[string]any{"correlation_id": "fam-" + a.network}}, &got))
		if got.Value != a.network {
			t.Fatalf("%s: kv.get %+v", a.network, got)
		}
		c.Close()
	}
	// The family a TCP peer proved is its evidence subject; over the Unix
	// socket the same user's uid is the stronger identity and wins.
	if got := subjectOf(t, h, "fam-tcp"); got != `{"id":"family:fam42","type":"btsp_family","verified":true}` {
		t.Errorf("TCP family peer recorded as %s", got)
	}
	if got := subjectOf(t, h, "fam-unix"); !strings.Contains(got, `"type":"unix_peer"`) {
		t.Errorf("same-user family peer recorded as %s", got)
	}

	// A wrong seed gets nowhere.
	if _, err := btsp.Dial(ctx, "tcp", h.Addr("tcp"), &btsp.Config{Seed: "guess"}); !errors.Is(err, btsp.ErrHandshakeFailed) {
		t.Fatalf("wrong seed: %v", err)
	}
}

// TestFamilyWithoutSeed: a family-scoped host without FAMILY_SEED serves
// cleartext and says so, unless RequireBTSP makes that an error; a
// standalone host advertises the BTSP version it speaks but requires none.
func TestFamilyWithoutSeed(t *testing.T) {
	t.Setenv("FAMILY_ID", "fam42")
	t.Setenv("FAMILY_SEED", "")
	h := newKVHost(t, socketConfig(t))
	if ts := h.Envelope().TransportSecurity; ts.BTSPRequired || !ts.CleartextAvailable {
		t.Errorf("family without seed: transport_security %+v", ts)
	}
	cfg := socketConfig(t)
	cfg.RequireBTSP = true
	if _, err := host.New(host.Info{Name: "kvtest", Version: "1.2.3", Domain: "kv"}, cfg); !errors.Is(err, btsp.ErrNoSeed) {
		t.Errorf("RequireBTSP without a seed: %v", err)
	}
	t.Setenv("FAMILY_ID", "default")
	h2 := newKVHost(t, &host.Config{RequireBTSP: true})
	if ts := h2.Envelope().TransportSecurity; ts.BTSPRequired || !ts.CleartextAvailable || ts.BTSPVersion != "2.0" {
		t.Errorf("standalone transport_security %+v", ts)
	}
}

// TestFamilyCleartextLineBoundedByMaxMessage: on a family socket, a
// cleartext peer (no seed) whose line runs past the host's
// MaxMessageBytes is cut off there, as on a socket without BTSP — the
// whitelist filter must not buffer up to 16 MiB per connection before the
// engine's own limit applies (a pre-authentication memory amplification).
func TestFamilyCleartextLineBoundedByMaxMessage(t *testing.T) {
	t.Setenv("FAMILY_ID", "fam42")
	t.Setenv("FAMILY_SEED", "seed-of-fam42")
	cfg := socketConfig(t)
	cfg.TCP = "127.0.0.1:0"
	cfg.RPC.MaxMessageBytes = 64 << 10
	h := newKVHost(t, cfg)
	serve(t, h)

	conn, err := net.Dial("tcp", h.Addr("tcp"))
	must(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	// A whitelisted method, then 1 MiB of one string and no newline.
	go func() {
		_, _ = conn.Write([]byte(`{"jsonrpc":"2.0","method":"ping","id":1,"x":"`))
		_, _ = conn.Write([]byte(strings.Repeat("a", 1<<20)))
	}()
	var buf [512]byte
	n, err := conn.Read(buf[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the host still reads a cleartext line past MaxMessageBytes (%d bytes) after 30 s", cfg.RPC.MaxMessageBytes)
	}
	if err == nil && !strings.Contains(string(buf[:n]), "error") {
		t.Fatalf("over-long line answered %q", buf[:n])
	}
}

// TestFamilyHTTPNeedsKeys: on a family host the stream listeners demand
// the seed, so a keyless HTTP listener (cleartext, no BTSP) would be a door
// around it: refused, unless keys guard it (or InsecureListen says so).
func TestFamilyHTTPNeedsKeys(t *testing.T) {
	t.Setenv("FAMILY_ID", "fam42")
	t.Setenv("FAMILY_SEED", "seed-of-fam42")
	t.Setenv("CHP_HOST_API_KEY", "")
	t.Setenv("CHP_HOST_API_KEYS", "")
	cfg := socketConfig(t)
	cfg.HTTP = "127.0.0.1:0"
	h := newKVHost(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Serve(ctx); !errors.Is(err, host.ErrInsecureListen) {
		t.Fatalf("keyless HTTP on a family host: %v", err)
	}
	t.Setenv("CHP_HOST_API_KEY", "k")
	cfg = socketConfig(t)
	cfg.HTTP = "127.0.0.1:0"
	serve(t, newKVHost(t, cfg))
}
