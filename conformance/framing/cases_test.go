package framing_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/conformance/framing"
)

func TestCasesParse(t *testing.T) {
	cases, err := framing.Cases()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, c := range cases {
		if ids[c.ID] {
			t.Errorf("duplicate case id %s", c.ID)
		}
		ids[c.ID] = true
		if c.Source == "" || len(c.Send) == 0 || len(c.Expect) == 0 {
			t.Errorf("%s: incomplete case %+v", c.Name, c)
		}
	}
	for _, want := range []string{"IPC.newline", "IPC.parse_error", "IPC.invalid_request", "IPC.method_not_found", "IPC.id_echo", "IPC.notification"} {
		if !ids[want] {
			t.Errorf("no case decides %s", want)
		}
	}
}

func TestParseCaseErrors(t *testing.T) {
	for name, src := range map[string]string{
		"no id":          "requirement: r\n-- send --\nx\n-- expect --\n{}\n",
		"bad header":     "id x\n-- send --\nx\n-- expect --\n{}\n",
		"bad severity":   "id: a\nrequirement: r\nseverity: maybe\n-- send --\nx\n-- expect --\n{}\n",
		"no expect":      "id: a\nrequirement: r\n-- send --\nx\n",
		"bad expect":     "id: a\nrequirement: r\n-- send --\nx\n-- expect --\n{nope\n",
		"unknown header": "id: a\nrequirement: r\ncolour: red\n-- send --\nx\n-- expect --\n{}\n",
		"extra section":  "id: a\nrequirement: r\n-- send --\nx\n-- expect --\n{}\n-- other --\n",
	} {
		if _, err := framing.ParseCase(name, []byte(src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func dec(t testing.TB, s string) any {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, value string
		want           bool
	}{
		{`{"id":1}`, `{"jsonrpc":"2.0","id":1,"result":{}}`, true},
		{`{"id":1}`, `{"id":1.0}`, true},
		{`{"id":1}`, `{"id":"1"}`, false},
		{`{"id":null}`, `{"id":null,"error":{"code":-32700}}`, true},
		{`{"id":null}`, `{"error":{"code":-32700}}`, false},
		{`{"error":{"code":-32700}}`, `{"error":{"code":-32700,"message":"Parse error"}}`, true},
		{`{"error":{"code":-32700}}`, `{"error":{"code":-32600}}`, false},
		{`[{"id":"a"},{"id":"b"}]`, `[{"id":"b"},{"id":"a"}]`, true},
		{`[{"id":"a"},{"id":"b"}]`, `[{"id":"a"}]`, false},
		{`[{"id":"a"},{"id":"a"}]`, `[{"id":"a"},{"id":"b"}]`, false},
		{`{"id":"é"}`, `{"id":"\u00e9"}`, true},
		{`{}`, `[]`, false},
		{`true`, `true`, true},
	}
	for _, tt := range tests {
		if got := framing.Match(dec(t, tt.pattern), dec(t, tt.value)); got != tt.want {
			t.Errorf("Match(%s, %s) = %v, want %v", tt.pattern, tt.value, got, tt.want)
		}
	}
}

func FuzzParseCase(f *testing.F) {
	files, _ := filepath.Glob("testdata/cases/*.txtar")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := framing.ParseCase("fuzz", data)
		if err != nil {
			return
		}
		if c.ID == "" || len(c.Send) == 0 || len(c.Expect) == 0 {
			t.Fatalf("accepted an incomplete case: %+v", c)
		}
	})
}

func FuzzMatch(f *testing.F) {
	f.Add([]byte(`{"id":1}`), []byte(`{"jsonrpc":"2.0","id":1}`))
	f.Add([]byte(`[{"id":"a"},1]`), []byte(`[1,{"id":"a"}]`))
	f.Fuzz(func(t *testing.T, p, v []byte) {
		var pv, vv any
		dp := json.NewDecoder(bytes.NewReader(p))
		dp.UseNumber()
		dv := json.NewDecoder(bytes.NewReader(v))
		dv.UseNumber()
		if dp.Decode(&pv) != nil || dv.Decode(&vv) != nil {
			return
		}
		// Every value matches itself.
		if !framing.Match(vv, vv) {
			t.Fatalf("%s does not match itself", v)
		}
		_ = framing.Match(pv, vv)
	})
}
