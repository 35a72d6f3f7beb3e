// Package spectest holds the examples of the JSON-RPC 2.0 specification
// (§7) and the comparison their replies are checked with, shared by the
// tests of package jsonrpc (streams) and package jhttp (HTTP).
package spectest

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// Cases are the examples of the JSON-RPC 2.0 specification, §7,
// verbatim. An empty want means no reply at all.
var Cases = []struct {
	Name, Req, Want string
	Batch           bool
}{
	{"positional 1", `{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}`, `{"jsonrpc": "2.0", "result": 19, "id": 1}`, false},
	{"positional 2", `{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}`, `{"jsonrpc": "2.0", "result": -19, "id": 2}`, false},
	{"named 1", `{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}`, `{"jsonrpc": "2.0", "result": 19, "id": 3}`, false},
	{"named 2", `{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}`, `{"jsonrpc": "2.0", "result": 19, "id": 4}`, false},
	{"notification 1", `{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}`, ``, false},
	{"notification 2", `{"jsonrpc": "2.0", "method": "foobar"}`, ``, false},
	{"unknown method", `{"jsonrpc": "2.0", "method": "foobar", "id": "1"}`, `{"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"}`, false},
	{"invalid JSON", `{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]`, `{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}`, false},
	{"invalid request", `{"jsonrpc": "2.0", "method": 1, "params": "bar"}`, `{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}`, false},
	{"batch invalid JSON", `[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]`, `{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}`, false},
	{"empty batch", `[]`, `{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}`, false},
	{"invalid batch of one", `[1]`, `[{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}]`, true},
	{"invalid batch", `[1,2,3]`, `[
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}
]`, true},
	{"mixed batch", `[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
  {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
  {"foo": "boo"},
  {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
  {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
]`, `[
  {"jsonrpc": "2.0", "result": 7, "id": "1"},
  {"jsonrpc": "2.0", "result": 19, "id": "2"},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "5"},
  {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"}
]`, true},
	{"all-notification batch", `[
  {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
  {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
]`, ``, true},
}

// Normalize turns a response (or batch) into a comparable value: messages
// are reduced to their jsonrpc/id/result/error code, since the
// specification's messages are examples while codes are normative; batch
// replies are sorted because their order is unspecified.
func Normalize(t testing.TB, raw string) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, raw)
	}
	norm := func(m any) any {
		o, ok := m.(map[string]any)
		if !ok {
			return m
		}
		if e, ok := o["error"].(map[string]any); ok {
			if msg, _ := e["message"].(string); msg == "" {
				t.Errorf("error without message: %s", raw)
			}
			o["error"] = map[string]any{"code": e["code"]}
		}
		return o
	}
	if arr, ok := v.([]any); ok {
		for i := range arr {
			arr[i] = norm(arr[i])
		}
		sort.Slice(arr, func(i, j int) bool {
			a, _ := json.Marshal(arr[i])
			b, _ := json.Marshal(arr[j])
			return string(a) < string(b)
		})
		return arr
	}
	return norm(v)
}
