package identity

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// Encoding is how binary data (keys, signatures, messages) is written in a
// JSON string. The Capability Wire Standard's Ed25519 methods take a
// per-field hint (message_encoding, signature_encoding, public_key_encoding)
// naming one of these; without a hint, Base64 is assumed.
type Encoding uint8

// The encodings of the Capability Wire Standard.
const (
	// Base64 is standard base64 (RFC 4648 §4, "+/" alphabet) with padding.
	// Decoding is strict: padding required, no whitespace or line breaks,
	// unused bits zero. It is the default.
	Base64 Encoding = iota
	// Hex is base16. Encode writes lowercase; Decode accepts either case
	// and an optional "0x" prefix, as bearDog does.
	Hex
	// Base64URL is the URL-safe alphabet (RFC 4648 §5, "-_"). Encode writes
	// it padded, the form bearDog decodes; Decode accepts it with or
	// without padding.
	Base64URL
	// UTF8 means the string's own UTF-8 bytes are the data.
	UTF8
	// None means the field carries no data: Decode returns no bytes
	// whatever the string holds, as bearDog does, and Encode writes "".
	None
)

var encodingNames = [...]string{Base64: "base64", Hex: "hex", Base64URL: "base64url", UTF8: "utf8", None: "none"}

// String is the hint name: "base64", "hex", "base64url", "utf8" or "none".
func (e Encoding) String() string {
	if int(e) < len(encodingNames) {
		return encodingNames[e]
	}
	return fmt.Sprintf("Encoding(%d)", uint8(e))
}

// ParseEncoding reads an encoding hint. The empty hint is Base64, the
// standard's default; names are matched exactly (lowercase), as the
// reference does.
func ParseEncoding(hint string) (Encoding, error) {
	if hint == "" {
		return Base64, nil
	}
	for e, name := range encodingNames {
		if hint == name {
			return Encoding(e), nil
		}
	}
	return 0, fmt.Errorf("identity: unknown encoding %q (want base64, hex, base64url, utf8 or none)", hint)
}

// Encode writes b in enc.
func Encode(b []byte, enc Encoding) string {
	switch enc {
	case Hex:
		return hex.EncodeToString(b)
	case Base64URL:
		return base64.URLEncoding.EncodeToString(b)
	case UTF8:
		return string(b)
	case None:
		return ""
	default:
		return base64.StdEncoding.EncodeToString(b)
	}
}

var (
	strictStd    = base64.StdEncoding.Strict()
	strictURL    = base64.URLEncoding.Strict()
	strictRawURL = base64.RawURLEncoding.Strict()
)

// Decode reads s written in enc. Errors say which encoding rejected what.
func Decode(s string, enc Encoding) ([]byte, error) {
	switch enc {
	case Base64:
		// Go's decoder skips \r and \n; the strict form allows neither.
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			return nil, fmt.Errorf("identity: base64: line break at offset %d", i)
		}
		b, err := strictStd.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("identity: base64: %w (want standard base64 with padding)", err)
		}
		return b, nil
	case Base64URL:
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			return nil, fmt.Errorf("identity: base64url: line break at offset %d", i)
		}
		dec := strictRawURL
		if strings.HasSuffix(s, "=") {
			dec = strictURL
		}
		b, err := dec.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("identity: base64url: %w", err)
		}
		return b, nil
	case Hex:
		h := s
		if len(h) >= 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X') {
			h = h[2:]
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, fmt.Errorf("identity: hex: %w", err)
		}
		return b, nil
	case UTF8:
		return []byte(s), nil
	case None:
		return []byte{}, nil
	}
	return nil, fmt.Errorf("identity: unknown encoding %v", enc)
}

// DecodeAny reads a fixed-size binary value (a 32-byte key, a 64-byte
// signature) written in whichever encoding its length shows: hex (2*size
// characters, optional 0x), padded standard base64, or base64url with or
// without padding. Specifications and implementations disagree here — the
// Capability Wire Standard says hex, bearDog sends base64 — so readers
// accept all of them. It returns the encoding it found.
func DecodeAny(s string, size int) ([]byte, Encoding, error) {
	padded := base64.StdEncoding.EncodedLen(size)
	raw := base64.RawURLEncoding.EncodedLen(size)
	var (
		b   []byte
		enc Encoding
		err error
	)
	switch h := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"); {
	case len(h) == 2*size && len(h) != padded && len(h) != raw:
		enc = Hex
		b, err = Decode(s, Hex)
	case len(s) == padded && strings.ContainsAny(s, "-_"):
		enc = Base64URL
		b, err = Decode(s, Base64URL)
	case len(s) == padded:
		enc = Base64
		b, err = Decode(s, Base64)
	case len(s) == raw:
		enc = Base64URL
		b, err = Decode(s, Base64URL)
	default:
		return nil, 0, fmt.Errorf("identity: %d characters is not a %d-byte value in hex (%d), base64 (%d) or unpadded base64url (%d)",
			len(s), size, 2*size, padded, raw)
	}
	if err != nil {
		return nil, enc, err
	}
	if len(b) != size {
		return nil, enc, fmt.Errorf("identity: decoded %d bytes, want %d", len(b), size)
	}
	return b, enc, nil
}
