package btsp

import (
	"bufio"
	"bytes"
	"crypto/ecdh"
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Reasons carried by the error frame {"error":"handshake_failed","reason":…}.
const (
	// ReasonFamily: the challenge response does not prove the family seed.
	ReasonFamily = "family_verification"
	// ReasonMalformed: a handshake message is not what the protocol says.
	ReasonMalformed = "malformed_message"
	// ReasonVersion: the peer speaks another handshake version.
	ReasonVersion = "unsupported_version"
	// ReasonCipher: the ends share no cipher suite.
	ReasonCipher = "no_common_cipher"
)

// ErrHandshakeFailed is what every failed handshake matches with errors.Is.
var ErrHandshakeFailed = errors.New("btsp: handshake failed")

// HandshakeError is a failed handshake: the reason (one of the Reason
// constants), whether the peer said so in an error frame (Remote) or this
// end found it, and the underlying error if any.
type HandshakeError struct {
	Reason string
	Remote bool
	Err    error
}

func (e *HandshakeError) Error() string {
	who := "local"
	if e.Remote {
		who = "peer"
	}
	if e.Err != nil {
		return fmt.Sprintf("btsp: handshake failed (%s: %s): %v", who, e.Reason, e.Err)
	}
	return fmt.Sprintf("btsp: handshake failed (%s: %s)", who, e.Reason)
}

// Unwrap returns the underlying error.
func (e *HandshakeError) Unwrap() error { return e.Err }

// Is reports ErrHandshakeFailed.
func (e *HandshakeError) Is(target error) bool { return target == ErrHandshakeFailed }

// maxHandshakeMsg bounds one handshake message in either framing.
const maxHandshakeMsg = 64 << 10

type clientHello struct {
	Protocol  string `json:"protocol"`
	Version   int    `json:"version"`
	ClientPub string `json:"client_ephemeral_pub"`
}

type serverHello struct {
	Version   int    `json:"version"`
	ServerPub string `json:"server_ephemeral_pub"`
	Challenge string `json:"challenge"`
}

type challengeResponse struct {
	Response        string `json:"response"`
	PreferredCipher string `json:"preferred_cipher"`
}

type handshakeComplete struct {
	Cipher    string `json:"cipher"`
	SessionID string `json:"session_id"`
}

type errorFrame struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// framing is how handshake messages travel: the client chooses, the server
// answers in kind (errors included).
type framing int

const (
	jsonLines framing = iota
	binaryFrames
)

// msgIO reads and writes handshake messages in one framing.
type msgIO struct {
	r *bufio.Reader
	w io.Writer
	f framing
}

func (m *msgIO) readRaw() ([]byte, error) {
	if m.f == binaryFrames {
		var hdr [4]byte
		if _, err := io.ReadFull(m.r, hdr[:]); err != nil {
			return nil, err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxHandshakeMsg {
			return nil, fmt.Errorf("handshake message of %d bytes", n)
		}
		b := make([]byte, n)
		_, err := io.ReadFull(m.r, b)
		return b, err
	}
	return readLine(m.r, maxHandshakeMsg)
}

// readLine reads one '\n'-terminated line of at most max bytes, without
// the terminator.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			return nil, fmt.Errorf("line longer than %d bytes", max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// read decodes one message into v; a peer's error frame becomes a remote
// HandshakeError.
func (m *msgIO) read(v any) error {
	b, err := m.readRaw()
	if err != nil {
		return err
	}
	return decodeMsg(b, v)
}

func decodeMsg(b []byte, v any) error {
	var ef errorFrame
	if json.Unmarshal(b, &ef) == nil && ef.Error != "" {
		return &HandshakeError{Reason: ef.Reason, Remote: true}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &HandshakeError{Reason: ReasonMalformed, Err: err}
	}
	return nil
}

func (m *msgIO) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var out []byte
	if m.f == binaryFrames {
		out = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
		out = append(out, b...)
	} else {
		out = append(b, '\n')
	}
	_, err = m.w.Write(out)
	return err
}

// fail sends the error frame for reason in the peer's framing (best
// effort: the connection is closed right after) and returns the error.
func (m *msgIO) fail(reason string, err error) error {
	_ = m.write(errorFrame{Error: "handshake_failed", Reason: reason})
	return &HandshakeError{Reason: reason, Err: err}
}

// session is what a handshake yields.
type session struct {
	in, out   *direction
	cipher    string
	sessionID string
}

// decodeKey reads a base64 X25519 public key (standard alphabet, padding
// optional).
func decodeKey(s string) (*ecdh.PublicKey, []byte, error) {
	b, err := decodeB64(s)
	if err != nil {
		return nil, nil, err
	}
	pub, err := ecdh.X25519().NewPublicKey(b)
	if err != nil {
		return nil, nil, err
	}
	return pub, b, nil
}

func decodeB64(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

var b64 = base64.StdEncoding.EncodeToString

// serverHandshake runs the accepting side after the ClientHello hello has
// been read. keys are the handshake keys the family seed may stand for.
func serverHandshake(m *msgIO, cfg *Config, keys [][]byte, hello []byte) (*session, error) {
	var ch clientHello
	if err := decodeMsg(hello, &ch); err != nil {
		return nil, m.fail(ReasonMalformed, err)
	}
	if ch.Protocol != ProtocolName {
		return nil, m.fail(ReasonMalformed, fmt.Errorf("protocol %q", ch.Protocol))
	}
	if ch.Version != Version {
		return nil, m.fail(ReasonVersion, fmt.Errorf("version %d", ch.Version))
	}
	clientPub, clientPubRaw, err := decodeKey(ch.ClientPub)
	if err != nil {
		return nil, m.fail(ReasonMalformed, fmt.Errorf("client_ephemeral_pub: %w", err))
	}
	priv, err := ecdh.X25519().GenerateKey(cfg.rand())
	if err != nil {
		return nil, err
	}
	challenge := make([]byte, 32)
	if _, err := io.ReadFull(cfg.rand(), challenge); err != nil {
		return nil, err
	}
	serverPub := priv.PublicKey().Bytes()
	if err := m.write(serverHello{Version: Version, ServerPub: b64(serverPub), Challenge: b64(challenge)}); err != nil {
		return nil, err
	}
	var cr challengeResponse
	if err := m.read(&cr); err != nil {
		var he *HandshakeError
		if errors.As(err, &he) && !he.Remote {
			return nil, m.fail(he.Reason, he.Err)
		}
		return nil, err
	}
	resp, err := decodeB64(cr.Response)
	if err != nil {
		return nil, m.fail(ReasonMalformed, fmt.Errorf("response: %w", err))
	}
	var hk []byte
	for _, k := range keys {
		if hmac.Equal(resp, challengeMAC(k, challenge, clientPubRaw, serverPub)) {
			hk = k
			break
		}
	}
	if hk == nil {
		return nil, m.fail(ReasonFamily, nil)
	}
	suite := cr.PreferredCipher
	if !cfg.accepts(suite) {
		suite = cfg.ciphers()[0]
	}
	shared, err := priv.ECDH(clientPub)
	if err != nil { // a low-order client key: no shared secret
		return nil, m.fail(ReasonFamily, err)
	}
	c2s, s2c := sessionKeys(shared, hk)
	s, err := newSession(suite, c2s, s2c, cfg)
	if err != nil {
		return nil, m.fail(ReasonCipher, err)
	}
	if err := m.write(handshakeComplete{Cipher: suite, SessionID: s.sessionID}); err != nil {
		return nil, err
	}
	return s, nil
}

func newSession(suite string, in, out []byte, cfg *Config) (*session, error) {
	din, err := newDirection(suite, in)
	if err != nil {
		return nil, err
	}
	dout, err := newDirection(suite, out)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	if _, err := io.ReadFull(cfg.rand(), id); err != nil {
		return nil, err
	}
	return &session{in: din, out: dout, cipher: suite, sessionID: hex.EncodeToString(id)}, nil
}

// clientHandshake runs the dialling side.
func clientHandshake(m *msgIO, cfg *Config) (*session, error) {
	keys, err := seedKeys(cfg.Seed)
	if err != nil {
		return nil, err
	}
	priv, err := ecdh.X25519().GenerateKey(cfg.rand())
	if err != nil {
		return nil, err
	}
	clientPub := priv.PublicKey().Bytes()
	if err := m.write(clientHello{Protocol: ProtocolName, Version: Version, ClientPub: b64(clientPub)}); err != nil {
		return nil, err
	}
	var sh serverHello
	if err := m.read(&sh); err != nil {
		return nil, err
	}
	if sh.Version != Version {
		return nil, &HandshakeError{Reason: ReasonVersion, Err: fmt.Errorf("server version %d", sh.Version)}
	}
	serverPub, serverPubRaw, err := decodeKey(sh.ServerPub)
	if err != nil {
		return nil, &HandshakeError{Reason: ReasonMalformed, Err: fmt.Errorf("server_ephemeral_pub: %w", err)}
	}
	challenge, err := decodeB64(sh.Challenge)
	if err != nil || len(challenge) < 16 {
		return nil, &HandshakeError{Reason: ReasonMalformed, Err: fmt.Errorf("challenge of %d bytes: %v", len(challenge), err)}
	}
	shared, err := priv.ECDH(serverPub)
	if err != nil {
		return nil, &HandshakeError{Reason: ReasonMalformed, Err: err}
	}
	hk := keys[0]
	cr := challengeResponse{Response: b64(challengeMAC(hk, challenge, clientPub, serverPubRaw)), PreferredCipher: cfg.ciphers()[0]}
	if err := m.write(cr); err != nil {
		return nil, err
	}
	var done handshakeComplete
	if err := m.read(&done); err != nil {
		return nil, err
	}
	if !cfg.accepts(done.Cipher) {
		return nil, &HandshakeError{Reason: ReasonCipher, Err: fmt.Errorf("server chose %q", done.Cipher)}
	}
	c2s, s2c := sessionKeys(shared, hk)
	s, err := newSession(done.Cipher, s2c, c2s, cfg)
	if err != nil {
		return nil, &HandshakeError{Reason: ReasonCipher, Err: err}
	}
	s.sessionID = done.SessionID
	return s, nil
}
