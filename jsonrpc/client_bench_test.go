package jsonrpc

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkClientDecodeLarge decodes a 300-provider discovery answer
// (~330 kB) the way the client does, beside json.Valid over the same bytes
// (the floor: one validating pass).
func BenchmarkClientDecodeLarge(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","result":{"providers":[`)
	for i := range 300 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"primal_id":"provider-` + strconv.Itoa(i) + `","capabilities":["crypto.sign","crypto.verify","llm:chat"],"endpoint":"unix:///run/user/1000/biomeos/p` + strconv.Itoa(i) + `.sock","descriptor":{"agent_id":"a","metadata":{"model":"example-model","notes":"` + strings.Repeat("x", 800) + `"}},"trust":{"trusted":true,"reason":"enrolled"}}`)
	}
	sb.WriteString(`]},"id":7}`)
	msg := []byte(sb.String())
	b.Run("client", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for range b.N {
			m, _, err := decodeClientMsg(msg, 0)
			if err != nil || !m.hasResult {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for range b.N {
			if !json.Valid(msg) {
				b.Fatal("invalid")
			}
		}
	})
}
