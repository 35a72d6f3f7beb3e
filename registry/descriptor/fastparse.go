package descriptor

import (
	"github.com/capmesh/capmesh/registry/internal/pyjson"
)

// fastParse reads the descriptors honest signers produce — the known
// members only, once each, plain ASCII strings without escapes, a port
// written as a plain integer — in one pass without building a generic
// tree. Anything else (an escape, a non-ASCII byte, an unknown or repeated
// member, a syntax or schema error) makes it give up, and Parse falls back
// to the generic path, which decides and words the error. The metadata
// object, whatever it holds, is handed to the strict generic parser.
// FuzzParse checks that whenever fastParse succeeds the generic path
// yields the same descriptor.
func fastParse(data []byte) (*Descriptor, bool) {
	p := fastParser{b: data}
	d := &Descriptor{Capabilities: []string{}}
	const (
		fAgent = 1 << iota
		fKey
		fNetwork
		fCaps
		fEndpoint
		fRegistered
		fExpires
		fMetadata
		fSignatures
	)
	var seen int
	var err error
	if !p.byte('{') {
		return nil, false
	}
	for first := true; ; first = false {
		if p.peek() == '}' && first {
			return nil, false // {} — the generic path words the missing members
		}
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return nil, false
		}
		var bit int
		switch key {
		case "agent_id":
			bit = fAgent
			d.AgentID, ok = p.str()
		case "node_public_key":
			bit = fKey
			d.NodePublicKey, ok = p.str()
		case "network_name":
			bit = fNetwork
			d.NetworkName, ok = p.str()
		case "capabilities":
			bit = fCaps
			ok = p.strings(&d.Capabilities)
		case "endpoint":
			bit = fEndpoint
			ok = p.endpoint(&d.Endpoint)
		case "registered_at", "expires_at":
			var s string
			if s, ok = p.str(); ok {
				var t Time
				if t, err = ParseTime(s); err != nil {
					return nil, false
				}
				if key == "registered_at" {
					bit, d.RegisteredAt = fRegistered, t
				} else {
					bit, d.ExpiresAt = fExpires, t
				}
			}
		case "metadata":
			bit = fMetadata
			ok = p.metadata(&d.Metadata)
		case "signatures":
			bit = fSignatures
			ok = p.signatures(&d.Signatures)
		default:
			return nil, false
		}
		if !ok || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		if p.byte(',') {
			continue
		}
		if !p.byte('}') {
			return nil, false
		}
		break
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, false
	}
	const required = fAgent | fKey | fNetwork | fEndpoint | fRegistered | fExpires
	if seen&required != required || !d.ExpiresAt.Instant().After(d.RegisteredAt.Instant()) {
		return nil, false
	}
	return d, true
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// byte consumes c (after whitespace) if it is next.
func (p *fastParser) byte(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes.
func (p *fastParser) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		c := p.b[p.i]
		if c == '"' {
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		}
		if c < 0x20 || c > 0x7e || c == '\\' {
			return "", false
		}
	}
	return "", false
}

func (p *fastParser) strings(out *[]string) bool {
	if !p.byte('[') {
		return false
	}
	if p.byte(']') {
		return true
	}
	for {
		s, ok := p.str()
		if !ok {
			return false
		}
		*out = append(*out, s)
		if p.byte(',') {
			continue
		}
		return p.byte(']')
	}
}

// port reads a plain integer 1..65535 that is not followed by a fraction
// or an exponent.
func (p *fastParser) port() (int, bool) {
	p.ws()
	v, n := 0, 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		if n == 0 && p.b[p.i] == '0' {
			return 0, false
		}
		v = v*10 + int(p.b[p.i]-'0')
		p.i++
		if n++; n > 5 {
			return 0, false
		}
	}
	if n == 0 || v > 65535 {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return v, true
}

func (p *fastParser) endpoint(ep *Endpoint) bool {
	if !p.byte('{') {
		return false
	}
	var host, port, scheme bool
	for {
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return false
		}
		switch key {
		case "host":
			if host {
				return false
			}
			host = true
			ep.Host, ok = p.str()
		case "port":
			if port {
				return false
			}
			port = true
			ep.Port, ok = p.port()
		case "scheme":
			if scheme {
				return false
			}
			scheme = true
			ep.Scheme, ok = p.str()
			ok = ok && validScheme(ep.Scheme)
		default:
			return false
		}
		if !ok {
			return false
		}
		if p.byte(',') {
			continue
		}
		if !p.byte('}') || !host || !port {
			return false
		}
		if !scheme {
			ep.Scheme = "ws"
		}
		return true
	}
}

func (p *fastParser) signatures(out *[]Signature) bool {
	if !p.byte('[') {
		return false
	}
	if p.byte(']') {
		return true
	}
	for {
		if !p.byte('{') {
			return false
		}
		var s Signature
		var keyID, sig bool
		for {
			key, ok := p.str()
			if !ok || !p.byte(':') {
				return false
			}
			switch {
			case key == "key_id" && !keyID:
				keyID = true
				s.KeyID, ok = p.str()
			case key == "sig" && !sig:
				sig = true
				s.Sig, ok = p.str()
			default:
				return false
			}
			if !ok {
				return false
			}
			if p.byte(',') {
				continue
			}
			if !p.byte('}') || !keyID || !sig {
				return false
			}
			break
		}
		*out = append(*out, s)
		if p.byte(',') {
			continue
		}
		return p.byte(']')
	}
}

// metadata finds the extent of the metadata object (tracking strings and
// nesting) and parses that slice with the strict generic parser.
func (p *fastParser) metadata(out *map[string]any) bool {
	if p.peek() != '{' {
		return false
	}
	start, depth, inStr := p.i, 0, false
	for ; p.i < len(p.b); p.i++ {
		c := p.b[p.i]
		if inStr {
			switch c {
			case '\\':
				p.i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if depth == 0 {
			p.i++
			break
		}
	}
	if depth != 0 {
		return false
	}
	raw := p.b[start:p.i]
	if string(raw) == "{}" {
		return true
	}
	v, err := pyjson.Decode(raw)
	if err != nil {
		return false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if _, err := pyjson.Marshal(m); err != nil {
		return false
	}
	*out = m
	return true
}
