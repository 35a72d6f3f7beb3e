// Package channel is the framing of package jsonrpc's stream transports:
// how a byte stream is cut into whole JSON-RPC messages and how a message
// is framed onto it. Newline, the Primal IPC Protocol v3.1's one JSON
// value per line, is the framing capmesh speaks on every stream; the
// Framing interface keeps jsonrpc's Server and Client independent of it.
package channel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/capmesh/capmesh/jsonrpc/internal/jsontext"
)

// Framing turns a byte stream into whole JSON-RPC messages and back. The
// Primal IPC Protocol's newline framing is the one capmesh speaks on every
// stream; the interface keeps the server and client independent of it, as
// the HTTP binding (a message per HTTP body) shows.
type Framing interface {
	// NewReader returns a reader of the frames arriving on r, each at most
	// max bytes.
	NewReader(r io.Reader, max int) FrameReader
	// AppendFrame appends msg, framed, to dst.
	AppendFrame(dst, msg []byte) []byte
}

// FrameReader yields successive frames.
type FrameReader interface {
	// ReadFrame returns the next frame. The slice is only valid until the
	// next call. It returns a *FrameTooLargeError when a frame exceeds the
	// limit; the stream cannot be resynchronised after that.
	ReadFrame() ([]byte, error)
	// Ready reports whether a whole frame is already buffered, so that the
	// next ReadFrame returns without waiting for input. The server writes
	// the replies it holds back whenever Ready is false: whatever else sits
	// in the buffer (a blank line, a space, the start of the next request)
	// must not delay them.
	Ready() bool
	// Buffered returns the number of input bytes read but not yet
	// returned as frames (a partial frame, blank lines).
	Buffered() int
	// Begun reports whether the start of a frame is buffered (input other
	// than blank lines) without the whole of it: the server gives such a
	// frame the line deadline rather than the idle one.
	Begun() bool
}

// FrameTooLargeError reports a frame longer than the reader's limit.
type FrameTooLargeError struct{ Limit int }

// Error states the frame limit that was exceeded.
func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("message exceeds the %d-byte limit", e.Limit)
}

// Newline is the newline-delimited framing of the Primal IPC Protocol v3.1:
// one JSON value per line, terminated by '\n'. Readers tolerate "\r\n" line
// ends and blank lines, accept a final line without its newline at end of
// stream, and skip the two-byte preamble 0xEC 0x01 if a stream starts with
// it. Writers emit exactly one '\n' after each message.
var Newline Framing = newlineFraming{}

type newlineFraming struct{}

// IsNewline reports whether f is Newline, whose frame is the message and a
// '\n': a writer may then build messages in place in its output buffer.
func IsNewline(f Framing) bool {
	_, ok := f.(newlineFraming)
	return ok
}

// readBufferSize is the per-connection read buffer. Frames longer than it
// are accumulated up to the frame limit.
const readBufferSize = 32 << 10

func (newlineFraming) NewReader(r io.Reader, max int) FrameReader {
	return &lineReader{br: bufio.NewReaderSize(r, readBufferSize), max: max}
}

func (newlineFraming) AppendFrame(dst, msg []byte) []byte {
	dst = append(dst, msg...)
	return append(dst, '\n')
}

type lineReader struct {
	br      *bufio.Reader
	max     int
	started bool
	acc     []byte
}

// preamble is the two-byte connection preamble some peers send first.
var preamble = [2]byte{0xEC, 0x01}

func (r *lineReader) Buffered() int { return r.br.Buffered() }

func (r *lineReader) Begun() bool {
	b, _ := r.br.Peek(r.br.Buffered())
	if !r.started && len(b) >= 2 && b[0] == preamble[0] && b[1] == preamble[1] {
		b = b[2:]
	}
	return !jsontext.IsBlank(b) && !r.Ready()
}

func (r *lineReader) Ready() bool {
	n := r.br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := r.br.Peek(n)
	if !r.started && len(b) >= 2 && b[0] == preamble[0] && b[1] == preamble[1] {
		b = b[2:]
	}
	// ReadFrame skips blank lines; only a complete non-blank line is a
	// frame it can return at once.
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		if !jsontext.IsBlank(b[:i]) {
			return true
		}
		b = b[i+1:]
	}
}

func (r *lineReader) ReadFrame() ([]byte, error) {
	if !r.started {
		r.started = true
		if b, err := r.br.Peek(2); err == nil && b[0] == preamble[0] && b[1] == preamble[1] {
			_, _ = r.br.Discard(2)
		}
	}
	for {
		line, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			r.acc = append(r.acc[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(r.acc) > r.max {
					return nil, &FrameTooLargeError{Limit: r.max}
				}
				line, err = r.br.ReadSlice('\n')
				r.acc = append(r.acc, line...)
			}
			line = r.acc
		}
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			return nil, err
		}
		line = trimEOL(line)
		if len(line) > r.max {
			return nil, &FrameTooLargeError{Limit: r.max}
		}
		if jsontext.IsBlank(line) {
			if err != nil {
				return nil, err
			}
			continue
		}
		if cap(r.acc) > 4*readBufferSize && &line[0] != &r.acc[0] {
			r.acc = nil // don't pin one huge frame's buffer forever
		}
		return line, nil
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}
