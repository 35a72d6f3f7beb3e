package api

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/capmesh/capmesh/registry"
)

// nextHop checks the hop count of routed params and returns the params
// to forward, with _meta.hops one higher (params without _meta keep their
// bytes, the count inserted first). Absent params become
// {"_meta":{"hops":1}} (a capability host reads an object without members
// other than _meta as empty params); array params cannot carry the count
// and are refused.
func (n *server) nextHop(params json.RawMessage) (json.RawMessage, error) {
	out, _, err := n.nextHopN(params)
	return out, err
}

// nextHopN is nextHop, also returning the hop count the forwarded call
// carries.
func (n *server) nextHopN(params json.RawMessage) (json.RawMessage, int64, error) {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		return json.RawMessage(`{"_meta":{"hops":1}}`), 1, nil
	}
	if p[0] != '{' {
		return nil, 0, registry.Refuse(registry.CodeWordInvalidParams, "a routed call takes object params: its hop count travels in params._meta.hops")
	}
	if !bytes.Contains(p, []byte("_meta")) && !bytes.Contains(p, []byte(`\u`)) && json.Valid(p) {
		// The common first hop: no member can be _meta (not even spelt
		// with escapes), so the caller's bytes go on with the count first.
		out := append(make([]byte, 0, len(p)+20), `{"_meta":{"hops":1}`...)
		if rest := bytes.TrimSpace(p[1:]); rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, p[1:]...), 1, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil {
		return nil, 0, registry.Refuse(registry.CodeWordInvalidParams, "params: %v", err)
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := obj["_meta"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return nil, 0, registry.Refuse(registry.CodeWordInvalidParams, "params._meta must be an object")
		}
	}
	var hops int64
	if raw, ok := meta["hops"]; ok {
		h, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err != nil || h < 0 {
			return nil, 0, registry.Refuse(registry.CodeWordInvalidParams, "params._meta.hops must be a non-negative integer")
		}
		hops = h
	}
	if hops >= int64(n.cfg.MaxHops) {
		e := registry.Refuse(registry.CodeWordHopLimit, "the request has passed %d routers (limit %d): refusing to forward it again (a routing loop?)", hops, n.cfg.MaxHops)
		e.Details = map[string]any{"hops": hops, "max_hops": n.cfg.MaxHops}
		return nil, 0, e
	}
	meta["hops"] = json.RawMessage(strconv.FormatInt(hops+1, 10))
	obj["_meta"], _ = marshalNoEscape(meta)
	out, err := marshalNoEscape(obj)
	return out, hops + 1, err
}

func marshalNoEscape(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
