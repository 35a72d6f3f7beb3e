package api

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/capmesh/capmesh/registry"
)

// appendProviders appends a JSON array of provider records: byte for byte
// what encoding/json writes for []providerView (the field order and
// escaping are the same, and the stored descriptor is spliced in as it is,
// already compact), without reflection or re-validating each descriptor —
// which was most of a 300-provider ipc.find_capability answer.
// TestProviderEncoding holds the two to the same bytes.
func appendProviders(b []byte, es []registry.Entry, view func(registry.Entry) providerView) []byte {
	b = append(b, '[')
	for i := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendProvider(b, view(es[i]))
	}
	return append(b, ']')
}

func appendProvider(b []byte, p providerView) []byte {
	b = append(b, `{"primal_id":`...)
	b = appendJSONString(b, p.PrimalID)
	b = append(b, `,"virtual_endpoint":`...)
	b = appendJSONString(b, p.VirtualEndpoint)
	b = append(b, `,"native_endpoint":`...)
	b = appendJSONString(b, p.NativeEndpoint)
	if p.Socket != "" {
		b = append(b, `,"socket":`...)
		b = appendJSONString(b, p.Socket)
	}
	b = append(b, `,"capabilities":[`...)
	for i, c := range p.Capabilities {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c)
	}
	b = append(b, `],"endpoint":`...)
	b = appendJSONString(b, p.Endpoint)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, p.Key)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, p.Source)
	b = append(b, `,"registered_at":`...)
	b = appendJSONTime(b, p.RegisteredAt)
	b = append(b, `,"expires_at":`...)
	b = appendJSONTime(b, p.ExpiresAt)
	b = append(b, `,"trust":{"trusted":`...)
	b = strconv.AppendBool(b, p.Trust.Trusted)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, p.Trust.Reason)
	b = append(b, '}')
	if p.Dialable != nil {
		b = strconv.AppendBool(append(b, `,"dialable":`...), *p.Dialable)
	}
	if raw, ok := p.Descriptor.(json.RawMessage); ok && len(raw) > 0 {
		b = append(b, `,"descriptor":`...)
		b = append(b, raw...)
	}
	return append(b, '}')
}

// appendJSONString writes s as encoding/json does: plain printable ASCII
// other than '"', '\\', '<', '>' and '&' as is, anything else through
// encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendJSONTime(b []byte, t time.Time) []byte {
	q, err := t.MarshalJSON()
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, q...)
}
