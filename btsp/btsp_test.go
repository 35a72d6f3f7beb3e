package btsp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testSeed = "family-seed-for-tests"

// pair returns both ends of a real connection over network ("unix" or
// "tcp" on loopback).
func pair(t *testing.T, network string) (client, server net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// echo serves s: every line read is written back with "echo:" before it.
func echo(s *Conn) chan error {
	done := make(chan error, 1)
	go func() {
		r := bufio.NewReader(s)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				done <- err
				return
			}
			if _, err := s.Write(append([]byte("echo:"), line...)); err != nil {
				done <- err
				return
			}
		}
	}()
	return done
}

func TestRoundTrip(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		for _, suite := range []string{ChaCha20Poly1305, HMACPlain, Null} {
			t.Run(network+"/"+suite, func(t *testing.T) {
				rc, rs := pair(t, network)
				cfg := &Config{Seed: testSeed, FamilyID: "fam1", Ciphers: []string{suite}}
				s := Server(rs, cfg)
				echo(s)
				c := Client(rc, cfg)
				r := bufio.NewReader(c)
				for _, msg := range []string{`{"jsonrpc":"2.0","id":1,"method":"a"}`, `{"id":2}`, strings.Repeat("x", 100000)} {
					if _, err := c.Write([]byte(msg + "\n")); err != nil {
						t.Fatal(err)
					}
					got, err := r.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					if got != "echo:"+msg+"\n" {
						t.Fatalf("got %.80q", got)
					}
				}
				st := c.ConnectionState()
				if st.Mode != ModeBTSP || st.Cipher != suite || st.SessionID == "" || st.FamilyID != "fam1" {
					t.Fatalf("client state %+v", st)
				}
				if ss := s.ConnectionState(); ss.SessionID != st.SessionID || ss.Cipher != suite {
					t.Fatalf("server state %+v, client %+v", ss, st)
				}
			})
		}
	}
}

// TestWireIsEncrypted: with ChaCha20-Poly1305 the message never crosses
// the wire in the clear.
func TestWireIsEncrypted(t *testing.T) {
	rc, rs := pair(t, "unix")
	cfg := &Config{Seed: testSeed}
	tap := &tapConn{Conn: rc}
	s := Server(rs, cfg)
	echo(s)
	c := Client(tap, cfg)
	secret := `{"method":"kv.put","params":{"value":"top-secret-value"}}`
	if _, err := c.Write([]byte(secret + "\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(tap.sent.Bytes(), []byte("top-secret-value")) || bytes.Contains(tap.got.Bytes(), []byte("top-secret-value")) {
		t.Fatal("plaintext seen on the wire")
	}
}

type tapConn struct {
	net.Conn
	sent, got bytes.Buffer
}

func (t *tapConn) Write(p []byte) (int, error) { t.sent.Write(p); return t.Conn.Write(p) }
func (t *tapConn) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	t.got.Write(p[:n])
	return n, err
}

// handshakeByHand runs a client handshake in the given framing over raw,
// optionally after the 0xEC 0x01 signal.
func handshakeByHand(t *testing.T, raw net.Conn, f framing, signal bool, seed string) (*session, *bufio.Reader, error) {
	t.Helper()
	if signal {
		if _, err := raw.Write([]byte{0xEC, 0x01}); err != nil {
			t.Fatal(err)
		}
	}
	br := bufio.NewReader(raw)
	s, err := clientHandshake(&msgIO{r: br, w: raw, f: f}, &Config{Seed: seed})
	return s, br, err
}

func TestBinaryHelloAndSignal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      framing
		signal bool
	}{{"binary", binaryFrames, false}, {"binary+signal", binaryFrames, true}, {"lines+signal", jsonLines, true}} {
		t.Run(tc.name, func(t *testing.T) {
			rc, rs := pair(t, "tcp")
			s := Server(rs, &Config{Seed: testSeed})
			echo(s)
			sess, br, err := handshakeByHand(t, rc, tc.f, tc.signal, testSeed)
			if err != nil {
				t.Fatal(err)
			}
			frame, err := sess.out.seal(nil, []byte(`{"id":7}`))
			if err != nil {
				t.Fatal(err)
			}
			rc.Write(frame)
			got, err := sess.in.readFrame(br)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != `echo:{"id":7}` {
				t.Fatalf("got %q", got)
			}
		})
	}
}

func TestWrongSeedFailsClosed(t *testing.T) {
	for _, f := range []framing{jsonLines, binaryFrames} {
		rc, rs := pair(t, "unix")
		s := Server(rs, &Config{Seed: testSeed})
		srvErr := make(chan error, 1)
		go func() { srvErr <- s.Handshake(context.Background()) }()
		_, br, err := handshakeByHand(t, rc, f, false, "another-family")
		var he *HandshakeError
		if !errors.As(err, &he) || !he.Remote || he.Reason != ReasonFamily {
			t.Fatalf("framing %d: client got %v, want the peer's family_verification error frame", f, err)
		}
		if err := <-srvErr; !errors.Is(err, ErrHandshakeFailed) {
			t.Fatalf("server: %v", err)
		}
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("server kept the connection open after a failed handshake")
		}
	}
}

// TestErrorFrameBytes pins the error frame in each framing.
func TestErrorFrameBytes(t *testing.T) {
	rc, rs := pair(t, "unix")
	go Server(rs, &Config{Seed: testSeed}).Handshake(context.Background())
	bad := []byte(`{"protocol":"btsp","version":1,"client_ephemeral_pub":"not base64!"}`)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(bad)))
	rc.Write(append(frame, bad...))
	got, _ := io.ReadAll(rc)
	want := `{"error":"handshake_failed","reason":"malformed_message"}`
	if len(got) < 4 || string(got[4:]) != want || binary.BigEndian.Uint32(got) != uint32(len(want)) {
		t.Fatalf("binary error frame %q", got)
	}

	rc, rs = pair(t, "unix")
	go Server(rs, &Config{Seed: testSeed}).Handshake(context.Background())
	rc.Write([]byte(`{"protocol":"btsp","version":9,"client_ephemeral_pub":"AAAA"}` + "\n"))
	got, _ = io.ReadAll(rc)
	if string(got) != `{"error":"handshake_failed","reason":"unsupported_version"}`+"\n" {
		t.Fatalf("line error frame %q", got)
	}
}

func TestBase64SeedEitherReading(t *testing.T) {
	// The server's FAMILY_SEED is base64 text; clients that feed HKDF the
	// text and clients that feed it the decoding are both accepted.
	for _, clientSeed := range []string{"c2VjcmV0LXNlZWQtYnl0ZXM=", "secret-seed-bytes"} {
		rc, rs := pair(t, "unix")
		s := Server(rs, &Config{Seed: "c2VjcmV0LXNlZWQtYnl0ZXM="})
		echo(s)
		c := Client(rc, &Config{Seed: clientSeed})
		if err := c.Handshake(context.Background()); err != nil {
			t.Fatalf("client seed %q: %v", clientSeed, err)
		}
	}
}

// recorder keeps what a client sent.
type recorder struct {
	net.Conn
	sent bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) { r.sent.Write(p); return r.Conn.Write(p) }

func TestReplayedHandshakeRefused(t *testing.T) {
	rc, rs := pair(t, "unix")
	echo(Server(rs, &Config{Seed: testSeed}))
	rec := &recorder{Conn: rc}
	if err := Client(rec, &Config{Seed: testSeed}).Handshake(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Replay the client's hello and challenge response to a new server:
	// its fresh challenge makes the old response worthless.
	rc2, rs2 := pair(t, "unix")
	srvErr := make(chan error, 1)
	go func() { srvErr <- Server(rs2, &Config{Seed: testSeed}).Handshake(context.Background()) }()
	lines := bytes.SplitAfter(rec.sent.Bytes(), []byte("\n"))
	br := bufio.NewReader(rc2)
	rc2.Write(lines[0])
	if _, err := br.ReadBytes('\n'); err != nil { // ServerHello
		t.Fatal(err)
	}
	rc2.Write(lines[1])
	reply, _ := br.ReadBytes('\n')
	if !bytes.Contains(reply, []byte(`"reason":"family_verification"`)) {
		t.Fatalf("replayed response answered %q", reply)
	}
	if err := <-srvErr; !errors.Is(err, ErrHandshakeFailed) {
		t.Fatalf("server accepted a replayed handshake: %v", err)
	}
}

// flipper flips one bit of the nth byte written after arm.
type flipper struct {
	net.Conn
	armed bool
	at    int
	n     int
}

func (f *flipper) Write(p []byte) (int, error) {
	if f.armed && f.n <= f.at && f.at < f.n+len(p) {
		q := append([]byte(nil), p...)
		q[f.at-f.n] ^= 0x01
		p = q
	}
	if f.armed {
		f.n += len(p)
	}
	return f.Conn.Write(p)
}

func TestTamperedFrames(t *testing.T) {
	for _, suite := range []string{ChaCha20Poly1305, HMACPlain} {
		for _, at := range []int{0, 3, 4, 10, 40} { // length bytes, body, tag
			rc, rs := pair(t, "unix")
			cfg := &Config{Seed: testSeed, Ciphers: []string{suite}}
			s := Server(rs, cfg)
			done := echo(s)
			f := &flipper{Conn: rc, at: at}
			c := Client(f, cfg)
			if err := c.Handshake(context.Background()); err != nil {
				t.Fatal(err)
			}
			f.armed = true
			c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"kv.get","params":{}}` + "\n"))
			// A length made longer waits for bytes that never come: end the
			// stream so that case shows as a truncated frame.
			rc.(interface{ CloseWrite() error }).CloseWrite()
			select {
			case err := <-done:
				if !errors.Is(err, ErrBadFrame) && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("%s byte %d: server read %v", suite, at, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s byte %d: tampered frame not refused", suite, at)
			}
		}
	}
}

func TestReplayedFrameAndTruncation(t *testing.T) {
	rc, rs := pair(t, "unix")
	s := Server(rs, &Config{Seed: testSeed})
	done := echo(s)
	sess, br, err := handshakeByHand(t, rc, jsonLines, false, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := sess.out.seal(nil, []byte(`{"id":1}`))
	rc.Write(frame)
	if _, err := sess.in.readFrame(br); err != nil {
		t.Fatal(err)
	}
	rc.Write(frame) // the same frame again: its nonce is spent
	if err := <-done; !errors.Is(err, ErrBadFrame) {
		t.Fatalf("replayed frame: %v", err)
	}

	rc, rs = pair(t, "unix")
	s = Server(rs, &Config{Seed: testSeed})
	done = echo(s)
	sess, _, err = handshakeByHand(t, rc, jsonLines, false, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ = sess.out.seal(nil, []byte(`{"id":1}`))
	rc.Write(frame[:len(frame)-5])
	rc.(interface{ CloseWrite() error }).CloseWrite()
	if err := <-done; !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v", err)
	}
}

func TestCounterNeverWraps(t *testing.T) {
	d, err := newDirection(ChaCha20Poly1305, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	d.seq = math.MaxUint64
	if _, err := d.seal(nil, []byte("last")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.seal(nil, []byte("again")); !errors.Is(err, ErrSeqExhausted) {
		t.Fatalf("after the last nonce: %v", err)
	}
}

// TestServerWithoutSeedCannotSpeak: a server that skips the challenge
// check (an impostor without the seed) completes the messages but cannot
// produce a frame the client accepts, because the session keys are salted
// with the seed's handshake key.
func TestServerWithoutSeedCannotSpeak(t *testing.T) {
	rc, rs := pair(t, "unix")
	go func() {
		br := bufio.NewReader(rs)
		m := &msgIO{r: br, w: rs, f: jsonLines}
		var ch clientHello
		if m.read(&ch) != nil {
			return
		}
		cpub, _, _ := decodeKey(ch.ClientPub)
		priv, _ := ecdh.X25519().GenerateKey(rand.Reader)
		m.write(serverHello{Version: 1, ServerPub: b64(priv.PublicKey().Bytes()), Challenge: b64(make([]byte, 32))})
		var cr challengeResponse
		m.read(&cr)
		shared, _ := priv.ECDH(cpub)
		c2s, s2c := sessionKeys(shared, handshakeKey([]byte("guess")))
		s, _ := newSession(ChaCha20Poly1305, c2s, s2c, &Config{})
		m.write(handshakeComplete{Cipher: ChaCha20Poly1305, SessionID: "x"})
		frame, _ := s.out.seal(nil, []byte(`{"jsonrpc":"2.0","id":1,"result":"forged"}`))
		rs.Write(frame)
	}()
	c := Client(rc, &Config{Seed: testSeed})
	_, err := bufio.NewReader(c).ReadString('\n')
	if !errors.Is(err, ErrBadFrame) {
		t.Fatalf("client accepted a frame from a server without the seed: %v", err)
	}
}

func TestCleartextPassThrough(t *testing.T) {
	rc, rs := pair(t, "unix")
	s := Server(rs, &Config{Seed: testSeed})
	echo(s)
	// Pipelined requests, a blank line first: all passed through as sent.
	rc.Write([]byte("\n{\"id\":1}\n[{\"id\":2}]\n"))
	br := bufio.NewReader(rc)
	for _, want := range []string{"echo:\n", "echo:{\"id\":1}\n", "echo:[{\"id\":2}]\n"} {
		got, err := br.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	if st := s.ConnectionState(); st.Mode != ModeCleartext {
		t.Fatalf("mode %q", st.Mode)
	}
}

func TestRequiredRefusesCleartext(t *testing.T) {
	cfg := &Config{Seed: testSeed, Require: true, Cleartext: DefaultCleartext}
	rc, rs := pair(t, "unix")
	s := Server(rs, cfg)
	done := echo(s)
	rc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"capabilities.list"}` + "\n"))
	br := bufio.NewReader(rc)
	got, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(got, "echo:") {
		t.Fatalf("whitelisted method: %q, %v", got, err)
	}
	rc.Write([]byte(`{"jsonrpc":"2.0","id":"k1","method":"kv.put","params":{}}` + "\n"))
	got, _ = br.ReadString('\n')
	want := `{"jsonrpc":"2.0","error":{"code":-32600,"message":"BTSP handshake required","data":{"reason":"This socket is family-scoped and requires a BTSP handshake before JSON-RPC traffic.","btsp_version":"2.0"}},"id":"k1"}` + "\n"
	if got != want {
		t.Fatalf("rejection %q", got)
	}
	if err := <-done; !errors.Is(err, ErrCleartextRefused) {
		t.Fatalf("reader: %v", err)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("connection still open after the rejection")
	}
	// A batch with one method off the whitelist is refused whole.
	rc, rs = pair(t, "unix")
	echo(Server(rs, cfg))
	rc.Write([]byte(`[{"id":1,"method":"health.liveness"},{"id":2,"method":"chp.export"}]` + "\n"))
	got, _ = bufio.NewReader(rc).ReadString('\n')
	if !strings.Contains(got, "BTSP handshake required") {
		t.Fatalf("mixed batch: %q", got)
	}
}

func TestRequiredStillSpeaksBTSP(t *testing.T) {
	cfg := &Config{Seed: testSeed, Require: true, Cleartext: DefaultCleartext}
	rc, rs := pair(t, "tcp")
	echo(Server(rs, cfg))
	c := Client(rc, &Config{Seed: testSeed})
	c.Write([]byte(`{"method":"kv.put"}` + "\n"))
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "echo:{\"method\":\"kv.put\"}\n" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestPrettyPrintedFrameIsOneLine(t *testing.T) {
	got := appendLine(nil, []byte("{\n  \"a\": \"x\\ny\"\n}\n"))
	if string(got) != "{\"a\":\"x\\ny\"}\n" {
		t.Fatalf("%q", got)
	}
	got = appendLine(nil, []byte("not\njson"))
	if string(got) != "not json\n" {
		t.Fatalf("%q", got)
	}
}

func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	if c, err := fromLookup(env()); c != nil || err != nil {
		t.Fatalf("no family: %v %v", c, err)
	}
	if c, err := fromLookup(env("FAMILY_ID", "default", "FAMILY_SEED", "s")); c != nil || err != nil {
		t.Fatalf("default family: %v %v", c, err)
	}
	if _, err := fromLookup(env("FAMILY_ID", "fam1", "BIOMEOS_INSECURE", "1")); !errors.Is(err, ErrInsecureConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if _, err := fromLookup(env("FAMILY_ID", "fam1")); !errors.Is(err, ErrNoSeed) {
		t.Fatalf("no seed: %v", err)
	}
	c, err := fromLookup(env("FAMILY_ID", "fam1", "FAMILY_SEED", "s"))
	if err != nil || !c.Require || c.FamilyID != "fam1" || c.Seed != "s" || !c.Cleartext("identity.get") || c.Cleartext("kv.put") {
		t.Fatalf("family: %+v %v", c, err)
	}
}

func TestDialAndListener(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "l.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := &Config{Seed: testSeed}
	bl := Listener(ln, cfg)
	go func() {
		c, err := bl.Accept()
		if err == nil {
			echo(c.(*Conn))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, "unix", ln.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("{}\n"))
	if got, _ := bufio.NewReader(c).ReadString('\n'); got != "echo:{}\n" {
		t.Fatalf("%q", got)
	}
	if _, ok := c.NetConn().(*net.UnixConn); !ok {
		t.Fatal("NetConn does not unwrap")
	}
}

func TestHandshakeTimeout(t *testing.T) {
	rc, rs := pair(t, "unix")
	_ = rc // a client that never speaks
	s := Server(rs, &Config{Seed: testSeed, HandshakeTimeout: 50 * time.Millisecond})
	err := s.Handshake(context.Background())
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("silent client: %v", err)
	}
}

func TestRejectionID(t *testing.T) {
	for id, want := range map[string]string{"": "null", "7": "7", `"a"`: `"a"`, "{bad": "null"} {
		var v map[string]any
		b := Rejection(json.RawMessage(id))
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		got, _ := json.Marshal(v["id"])
		if string(got) != want {
			t.Fatalf("id %q → %s", id, got)
		}
	}
}

// TestWhitelistMatchesNamesExactly pins the bypass the independent client
// found: encoding/json's struct decoding matched "METHOD" for "method", so
// the whitelist saw "ping" where the JSON-RPC engine ran secret.read.
func TestWhitelistMatchesNamesExactly(t *testing.T) {
	c := &Conn{cfg: &Config{Cleartext: DefaultCleartext}}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"secret.read","METHOD":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"Method":"ping","method":"secret.read"}`,
		`{"jsonrpc":"2.0","id":1,"Method":"ping"}`,
		`[{"id":1,"method":"ping"},{"id":2,"method":"secret.read","mEthod":"ping"}]`,
		`{"id":1,"method":"ping","method":"secret.read"}`, // the engine takes the last
	} {
		if _, ok := c.allowed([]byte(line)); ok {
			t.Errorf("whitelist let %s through", line)
		}
	}
	for _, line := range []string{`{"id":1,"method":"secret.read","method":"ping"}`, ` {"method":"ping"} `} {
		if _, ok := c.allowed([]byte(line)); !ok {
			t.Errorf("whitelist refused %s", line)
		}
	}
	if isHello([]byte(`{"Protocol":"btsp"}`)) || !isHello([]byte(`{"protocol":"btsp"}`)) {
		t.Error("hello detection does not match the member name exactly")
	}
}

func TestHelloAfterBlankLines(t *testing.T) {
	rc, rs := pair(t, "unix")
	echo(Server(rs, &Config{Seed: testSeed, Require: true}))
	rc.Write([]byte("\n \r\n"))
	sess, br, err := handshakeByHand(t, rc, jsonLines, false, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := sess.out.seal(nil, []byte(`{"id":3}`))
	rc.Write(frame)
	if got, err := sess.in.readFrame(br); err != nil || string(got) != `echo:{"id":3}` {
		t.Fatalf("%q %v", got, err)
	}
}

// TestPlainTextGetsRejection: text that is not JSON is not taken for a
// binary frame; a family socket answers it with the JSON-RPC rejection.
func TestPlainTextGetsRejection(t *testing.T) {
	rc, rs := pair(t, "unix")
	echo(Server(rs, &Config{Seed: testSeed, Require: true, Cleartext: DefaultCleartext}))
	rc.Write([]byte("not json\n"))
	got, _ := bufio.NewReader(rc).ReadString('\n')
	if !strings.Contains(got, `"message":"BTSP handshake required"`) {
		t.Fatalf("got %q", got)
	}
}
