package btsp

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"golang.org/x/crypto/chacha20poly1305"
)

// The cipher suites a handshake can settle on.
const (
	// ChaCha20Poly1305 encrypts and authenticates every frame; the default
	// and the only suite a capmesh end accepts unless told otherwise.
	ChaCha20Poly1305 = "BTSP_CHACHA20_POLY1305"
	// HMACPlain authenticates frames without encrypting them.
	HMACPlain = "BTSP_HMAC_PLAIN"
	// Null neither encrypts nor authenticates: for tests only.
	Null = "BTSP_NULL"
)

// MaxFrame is the largest frame body (ciphertext and tag) either end
// accepts: 16 MiB.
const MaxFrame = 16 << 20

// Record-layer errors. Every one of them ends the connection: a frame that
// does not open is never skipped.
var (
	ErrFrameTooLarge = errors.New("btsp: frame larger than 16 MiB")
	ErrBadFrame      = errors.New("btsp: frame failed authentication")
	ErrSeqExhausted  = errors.New("btsp: frame counter exhausted")
)

const macSize = sha256.Size

// direction is one direction of a session: its suite, its key and the
// counter that is its nonce. A counter is never reused: the frame after
// the 2^64-1st is refused rather than wrapped.
type direction struct {
	suite string
	aead  cipher.AEAD // ChaCha20Poly1305
	key   []byte      // HMACPlain
	seq   uint64
	done  bool // the counter has been used up
}

func newDirection(suite string, key []byte) (*direction, error) {
	d := &direction{suite: suite, key: key}
	switch suite {
	case ChaCha20Poly1305:
		a, err := chacha20poly1305.New(key)
		if err != nil {
			return nil, fmt.Errorf("btsp: %w", err)
		}
		d.aead = a
	case HMACPlain, Null:
	default:
		return nil, fmt.Errorf("btsp: unknown cipher suite %q", suite)
	}
	return d, nil
}

// nonce is the 12-byte nonce of the current counter: four zero bytes and
// the counter, big-endian.
func (d *direction) nonce() (n [chacha20poly1305.NonceSize]byte) {
	binary.BigEndian.PutUint64(n[4:], d.seq)
	return n
}

func (d *direction) overhead() int {
	switch d.suite {
	case ChaCha20Poly1305:
		return d.aead.Overhead()
	case HMACPlain:
		return macSize
	}
	return 0
}

// next advances the counter, refusing to wrap it.
func (d *direction) next() error {
	if d.done {
		return ErrSeqExhausted
	}
	if d.seq == math.MaxUint64 {
		d.done = true
	} else {
		d.seq++
	}
	return nil
}

// seal appends one frame carrying payload to dst: the 4-byte big-endian
// body length, then the body. The length header is the AEAD's additional
// data, so it cannot be changed either.
func (d *direction) seal(dst, payload []byte) ([]byte, error) {
	if d.done {
		return dst, ErrSeqExhausted
	}
	n := len(payload) + d.overhead()
	if n > MaxFrame {
		return dst, ErrFrameTooLarge
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(n))
	dst = append(dst, hdr[:]...)
	nonce := d.nonce()
	switch d.suite {
	case ChaCha20Poly1305:
		dst = d.aead.Seal(dst, nonce[:], payload, hdr[:])
	case HMACPlain:
		dst = append(dst, payload...)
		dst = append(dst, d.mac(nonce[:], hdr[:], payload)...)
	default:
		dst = append(dst, payload...)
	}
	return dst, d.next()
}

func (d *direction) mac(nonce, hdr, payload []byte) []byte {
	m := hmac.New(sha256.New, d.key)
	m.Write(nonce)
	m.Write(hdr)
	m.Write(payload)
	return m.Sum(nil)
}

// readFrame reads one frame from r and opens it. A short read inside a
// frame is io.ErrUnexpectedEOF; a clean end before a frame is io.EOF.
func (d *direction) readFrame(r io.Reader) ([]byte, error) {
	if d.done {
		return nil, ErrSeqExhausted
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return nil, ErrFrameTooLarge
	}
	if int(n) < d.overhead() {
		return nil, ErrBadFrame
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	nonce := d.nonce()
	var payload []byte
	switch d.suite {
	case ChaCha20Poly1305:
		p, err := d.aead.Open(body[:0], nonce[:], body, hdr[:])
		if err != nil {
			return nil, ErrBadFrame
		}
		payload = p
	case HMACPlain:
		p, tag := body[:len(body)-macSize], body[len(body)-macSize:]
		if !hmac.Equal(tag, d.mac(nonce[:], hdr[:], p)) {
			return nil, ErrBadFrame
		}
		payload = p
	default:
		payload = body
	}
	return payload, d.next()
}
