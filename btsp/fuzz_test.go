package btsp

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// scripted is a connection whose peer sent exactly r's bytes and then
// closed; what is written to it is dropped.
type scripted struct{ r *bytes.Reader }

func (s *scripted) Read(p []byte) (int, error)       { return s.r.Read(p) }
func (s *scripted) Write(p []byte) (int, error)      { return len(p), nil }
func (s *scripted) Close() error                     { return nil }
func (s *scripted) LocalAddr() net.Addr              { return &net.UnixAddr{Name: "fuzz", Net: "unix"} }
func (s *scripted) RemoteAddr() net.Addr             { return &net.UnixAddr{Name: "fuzz", Net: "unix"} }
func (s *scripted) SetDeadline(time.Time) error      { return nil }
func (s *scripted) SetReadDeadline(time.Time) error  { return nil }
func (s *scripted) SetWriteDeadline(time.Time) error { return nil }

var _ io.Reader = (*scripted)(nil)

// FuzzServerAccept feeds arbitrary client bytes to an accepting end that
// requires BTSP: it must finish (handshake error, rejection or cleartext
// decision) without a panic, and never hand an unauthenticated byte to the
// reader as a secured message.
func FuzzServerAccept(f *testing.F) {
	f.Add([]byte(`{"protocol":"btsp","version":1,"client_ephemeral_pub":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"kv.put"}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"identity.get"}` + "\n"))
	f.Add([]byte("\xec\x01\x00\x00\x00\x02{}"))
	f.Add([]byte("\x00\x00\x00\x05hello"))
	f.Add([]byte("[{\"method\":\"health\"},1]\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := Server(&scripted{r: bytes.NewReader(in)}, &Config{Seed: testSeed, Require: true, Cleartext: DefaultCleartext, HandshakeTimeout: time.Second})
		if err := s.Handshake(context.Background()); err != nil {
			return
		}
		if st := s.ConnectionState(); st.Mode == ModeBTSP {
			t.Fatalf("fuzz input completed a handshake without the seed: %q", in)
		}
		// Whatever the reader gets in cleartext must be whitelisted lines.
		line, err := bufio.NewReader(s).ReadBytes('\n')
		if err == nil {
			if _, ok := s.allowed(bytes.TrimRight(line, "\n")); !ok {
				t.Fatalf("refused line reached the reader: %q", line)
			}
		}
	})
}

// FuzzReadFrame opens arbitrary frames: a frame either fails or, for the
// authenticated suites, is one this direction sealed.
func FuzzReadFrame(f *testing.F) {
	d, _ := newDirection(ChaCha20Poly1305, make([]byte, 32))
	good, _ := d.seal(nil, []byte(`{"id":1}`))
	f.Add(good)
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 3, 1, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, suite := range []string{ChaCha20Poly1305, HMACPlain, Null} {
			d, err := newDirection(suite, make([]byte, 32))
			if err != nil {
				t.Fatal(err)
			}
			p, err := d.readFrame(bytes.NewReader(in))
			if err != nil || suite == Null {
				continue
			}
			w, _ := newDirection(suite, make([]byte, 32))
			want, _ := w.seal(nil, p)
			if !bytes.Equal(want, in[:len(want)]) {
				t.Fatalf("%s opened a frame it did not seal: %q", suite, in)
			}
		}
	})
}
