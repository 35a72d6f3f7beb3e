package btsp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Mode is what an accepted connection turned out to be.
type Mode string

// The modes of a Conn after its handshake (or its first line).
const (
	// ModeBTSP: a completed handshake; every message is a frame.
	ModeBTSP Mode = "btsp"
	// ModeCleartext: plain JSON-RPC passed through (BTSP not required).
	ModeCleartext Mode = "cleartext"
	// ModeWhitelist: plain JSON-RPC on a socket that requires BTSP, served
	// only for whitelisted methods.
	ModeWhitelist Mode = "cleartext-whitelist"
)

// State describes a Conn after its handshake.
type State struct {
	Mode      Mode
	Cipher    string // ModeBTSP only
	SessionID string // ModeBTSP only
	// FamilyID is the family the peer proved membership of (ModeBTSP only).
	FamilyID string
}

// rejection is the Capability Wire Standard's answer to plain JSON-RPC on
// a family-scoped socket, byte for byte (with the request's id when one
// could be read).
const rejectionData = `{"reason":"This socket is family-scoped and requires a BTSP handshake before JSON-RPC traffic.","btsp_version":"2.0"}`

// Rejection returns the rejection frame for a request id (nil: null).
func Rejection(id json.RawMessage) []byte {
	if len(id) == 0 || !json.Valid(id) {
		id = json.RawMessage("null")
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"BTSP handshake required","data":%s},"id":%s}`+"\n", rejectionData, id)
}

// ErrCleartextRefused is returned by Read after a refused cleartext
// request was answered with the rejection frame.
var ErrCleartextRefused = errors.New("btsp: cleartext request refused on a family-scoped socket")

// detectWindow is how much of a first line is looked at to tell a
// JSON-line ClientHello from plain JSON-RPC; a hello is far smaller.
const detectWindow = 4 << 10

// Conn is a connection that speaks BTSP. It presents the stream as
// newline-delimited JSON: each frame read is one line, each line written is
// one frame. The handshake runs on the first Read or Write, or on an
// explicit Handshake. Conn is safe for one reader and one writer at once.
type Conn struct {
	raw    net.Conn
	br     *bufio.Reader
	cfg    *Config
	client bool

	hsMu   sync.Mutex
	hsDone bool
	hsErr  error
	state  State
	sess   *session

	rmu  sync.Mutex
	rbuf []byte

	wmu  sync.Mutex
	wbuf []byte // a line not yet ended by '\n'
	fbuf []byte // frame scratch

	dlMu          sync.Mutex
	rdl, wdl      time.Time
	inHandshake   bool
	rejectionSent bool
}

// Server wraps an accepted connection; the handshake (or the cleartext
// decision) happens on first use.
func Server(raw net.Conn, cfg *Config) *Conn {
	return &Conn{raw: raw, br: bufio.NewReaderSize(raw, 64<<10), cfg: cfg}
}

// Client wraps a dialled connection; the handshake happens on first use.
func Client(raw net.Conn, cfg *Config) *Conn {
	return &Conn{raw: raw, br: bufio.NewReaderSize(raw, 64<<10), cfg: cfg, client: true}
}

// Handshake runs the handshake now, bounded by ctx and by the Config's
// HandshakeTimeout. It is idempotent: later calls return the first result.
func (c *Conn) Handshake(ctx context.Context) error {
	c.hsMu.Lock()
	defer c.hsMu.Unlock()
	if c.hsDone {
		return c.hsErr
	}
	c.hsDone = true
	deadline := time.Now().Add(c.cfg.handshakeTimeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.dlMu.Lock()
	c.inHandshake = true
	c.dlMu.Unlock()
	_ = c.raw.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.raw.SetDeadline(time.Unix(1, 0)) })
	if c.client {
		c.hsErr = c.clientSide()
	} else {
		c.hsErr = c.serverSide()
	}
	stop()
	c.dlMu.Lock()
	c.inHandshake = false
	_ = c.raw.SetReadDeadline(c.rdl)
	_ = c.raw.SetWriteDeadline(c.wdl)
	c.dlMu.Unlock()
	if c.hsErr != nil {
		_ = c.raw.Close()
	}
	return c.hsErr
}

func (c *Conn) clientSide() error {
	s, err := clientHandshake(&msgIO{r: c.br, w: c.raw, f: jsonLines}, c.cfg)
	if err != nil {
		return err
	}
	c.sess = s
	c.state = State{Mode: ModeBTSP, Cipher: s.cipher, SessionID: s.sessionID, FamilyID: c.cfg.FamilyID}
	return nil
}

// serverSide tells a ClientHello (JSON line or binary frame) from plain
// JSON-RPC and runs the handshake or settles the cleartext mode.
func (c *Conn) serverSide() error {
	first, err := c.br.Peek(1)
	if err != nil {
		return err
	}
	if first[0] == 0xEC { // the first-byte signal of a BTSP client
		if b, err := c.br.Peek(2); err == nil && b[1] == 0x01 {
			_, _ = c.br.Discard(2)
			if first, err = c.br.Peek(1); err != nil {
				return err
			}
		}
	}
	if !isText(first[0]) && c.binaryHelloAhead() {
		return c.handshakeAs(binaryFrames, nil)
	}
	if skip, line, ok := c.peekLine(); ok && isHello(line) {
		_, _ = c.br.Discard(skip + len(line) + 1)
		return c.handshakeAs(jsonLines, bytes.TrimRight(line, "\r"))
	}
	if c.cfg.Require {
		c.state = State{Mode: ModeWhitelist}
	} else {
		c.state = State{Mode: ModeCleartext}
	}
	return nil
}

// isText reports whether a first byte starts JSON text (an object, a
// batch, or whitespace); any other byte starts a binary frame, whose
// 4-byte length could not begin with these and stay within the limits.
func isText(b byte) bool {
	switch b {
	case '{', '[', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

// binaryHelloAhead reports whether the next four bytes can be the length
// of a binary handshake message. Text that is not JSON ("hello\n") reads
// as a length far beyond any hello's and is treated as (refused or passed)
// cleartext instead, so such a client gets the JSON-RPC rejection the
// standard asks for rather than a binary error frame.
func (c *Conn) binaryHelloAhead() bool {
	b, err := c.br.Peek(4)
	if err != nil {
		return true // too short for cleartext too: the handshake reports it
	}
	n := binary.BigEndian.Uint32(b)
	return n > 0 && n <= maxHandshakeMsg
}

// peekLine returns the first non-blank line without consuming it, and how
// many bytes of blank lines and whitespace come before it, if it ends
// within detectWindow bytes.
func (c *Conn) peekLine() (skip int, line []byte, ok bool) {
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		skip = len(buf) - len(bytes.TrimLeft(buf, " \t\r\n"))
		if i := bytes.IndexByte(buf[skip:], '\n'); i >= 0 {
			return skip, buf[skip : skip+i], true
		}
		if c.br.Buffered() >= detectWindow {
			return 0, nil, false
		}
		if _, err := c.br.Peek(c.br.Buffered() + 1); err != nil {
			return 0, nil, false
		}
	}
}

func isHello(line []byte) bool {
	var p string
	return memberString(line, "protocol", &p) && p == ProtocolName
}

// memberString reads the string member name of a JSON object, matching
// the name exactly as the JSON-RPC engine does (encoding/json's struct
// decoding matches names case-insensitively, so {"METHOD":"ping",
// "method":"secret.read"} would read as "ping" there and run secret.read
// in the engine). A duplicate name counts as its last occurrence, as in
// the engine. It reports false for anything that is not an object with
// that member as a string.
func memberString(obj []byte, name string, out *string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return false
	}
	raw, ok := m[name]
	return ok && json.Unmarshal(raw, out) == nil
}

func (c *Conn) handshakeAs(f framing, hello []byte) error {
	m := &msgIO{r: c.br, w: c.raw, f: f}
	keys, err := seedKeys(c.cfg.Seed)
	if err != nil {
		return m.fail(ReasonFamily, err)
	}
	if hello == nil {
		if hello, err = m.readRaw(); err != nil {
			return m.fail(ReasonMalformed, err)
		}
	}
	s, err := serverHandshake(m, c.cfg, keys, hello)
	if err != nil {
		return err
	}
	c.sess = s
	c.state = State{Mode: ModeBTSP, Cipher: s.cipher, SessionID: s.sessionID, FamilyID: c.cfg.FamilyID}
	return nil
}

// ConnectionState returns the state after the handshake (zero before).
func (c *Conn) ConnectionState() State {
	c.hsMu.Lock()
	defer c.hsMu.Unlock()
	return c.state
}

// PeerFamily returns the family the peer proved membership of: the
// Config's FamilyID after a completed handshake, "" before one or in a
// cleartext mode. The JSON-RPC engine reads it into its Peer.
func (c *Conn) PeerFamily() string {
	st := c.ConnectionState()
	if st.Mode != ModeBTSP {
		return ""
	}
	if st.FamilyID == "" {
		return "unnamed"
	}
	return st.FamilyID
}

// NetConn returns the wrapped connection (for peer credentials).
func (c *Conn) NetConn() net.Conn { return c.raw }

// Read reads decrypted JSON-RPC messages, one line each.
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.Handshake(context.Background()); err != nil {
		return 0, err
	}
	switch c.state.Mode {
	case ModeCleartext:
		return c.br.Read(p)
	case ModeWhitelist:
		return c.readWhitelisted(p)
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.rbuf) == 0 {
		payload, err := c.sess.in.readFrame(c.br)
		if err != nil {
			return 0, err
		}
		c.rbuf = appendLine(c.rbuf[:0], payload)
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// appendLine appends a frame's message as exactly one line: a message
// that spans lines (pretty-printed JSON) is compacted, and one that is not
// JSON has its line breaks blanked, so the reader sees one bad line.
func appendLine(dst, msg []byte) []byte {
	msg = bytes.TrimRight(msg, "\r\n")
	if bytes.ContainsAny(msg, "\r\n") {
		var b bytes.Buffer
		if json.Compact(&b, msg) == nil {
			msg = b.Bytes()
		} else {
			msg = bytes.Map(func(r rune) rune {
				if r == '\r' || r == '\n' {
					return ' '
				}
				return r
			}, msg)
		}
	}
	return append(append(dst, msg...), '\n')
}

// readWhitelisted passes cleartext lines whose every method is on the
// whitelist; anything else is answered with the rejection frame and ends
// the connection.
func (c *Conn) readWhitelisted(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.rbuf) == 0 {
		line, err := readLine(c.br, c.cfg.maxLine())
		if err != nil {
			return 0, err
		}
		if id, ok := c.allowed(line); !ok {
			c.reject(id)
			return 0, ErrCleartextRefused
		}
		c.rbuf = append(append(c.rbuf[:0], line...), '\n')
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// allowed reports whether a cleartext line may be served, and the id to
// answer with when not.
func (c *Conn) allowed(line []byte) (json.RawMessage, bool) {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, true
	}
	ok := func(obj []byte) bool {
		var method string
		return memberString(obj, "method", &method) && c.cfg.Cleartext != nil && c.cfg.Cleartext(method)
	}
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] == '{' {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(trimmed, &m)
		return m["id"], ok(trimmed)
	}
	var batch []json.RawMessage
	if json.Unmarshal(trimmed, &batch) != nil || len(batch) == 0 {
		return nil, false
	}
	for _, r := range batch {
		if !ok(r) {
			return nil, false
		}
	}
	return nil, true
}

func (c *Conn) reject(id json.RawMessage) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.rejectionSent {
		c.rejectionSent = true
		_ = c.raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.raw.Write(Rejection(id))
	}
	_ = c.raw.Close()
}

// Write sends each complete line of p as one frame (cleartext modes write
// through). A line without its '\n' waits for the rest.
func (c *Conn) Write(p []byte) (int, error) {
	if err := c.Handshake(context.Background()); err != nil {
		return 0, err
	}
	if c.state.Mode != ModeBTSP {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if c.rejectionSent {
			return 0, net.ErrClosed
		}
		return c.raw.Write(p)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	total := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(c.wbuf)+len(p) > MaxFrame {
				return 0, ErrFrameTooLarge
			}
			c.wbuf = append(c.wbuf, p...)
			break
		}
		line := p[:i]
		if len(c.wbuf) > 0 {
			c.wbuf = append(c.wbuf, line...)
			line = c.wbuf
		}
		if len(bytes.TrimSpace(line)) > 0 {
			frame, err := c.sess.out.seal(c.fbuf[:0], bytes.TrimRight(line, "\r"))
			if err != nil {
				return 0, err
			}
			c.fbuf = frame
			if _, err := c.raw.Write(frame); err != nil {
				return 0, err
			}
		}
		c.wbuf = c.wbuf[:0]
		p = p[i+1:]
	}
	return total, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.raw.Close() }

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return c.raw.LocalAddr() }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// SetDeadline sets both deadlines (kept across the handshake's own).
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.rdl = t
	if c.inHandshake {
		return nil
	}
	return c.raw.SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.wdl = t
	if c.inHandshake {
		return nil
	}
	return c.raw.SetWriteDeadline(t)
}

// Listener wraps every connection an inner listener accepts with Server.
func Listener(inner net.Listener, cfg *Config) net.Listener {
	return &listener{Listener: inner, cfg: cfg}
}

type listener struct {
	net.Listener
	cfg *Config
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Server(c, l.cfg), nil
}

// Dial connects to address on network and completes the handshake,
// bounded by ctx.
func Dial(ctx context.Context, network, address string, cfg *Config) (*Conn, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	c := Client(raw, cfg)
	if err := c.Handshake(ctx); err != nil {
		return nil, err
	}
	return c, nil
}
