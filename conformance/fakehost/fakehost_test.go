package fakehost_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capmesh/capmesh/conformance/fakehost"
)

func TestParseSpec(t *testing.T) {
	s, err := fakehost.ParseSpec("x", []byte(`{"socket":"x.sock","chp":"fixtures","answers":{"capabilities.list":{"result":{"primal":"x","version":"1.0.0","methods":["a.b"]}}}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Socket != "x.sock" || s.CHP != "fixtures" || len(s.Answers) != 1 {
		t.Errorf("%+v", s)
	}
	if _, err := fakehost.New(s); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"no capabilities":  "socket: a.sock\n",
		"bad header":       "socket a.sock\n-- capabilities.list --\n{}\n",
		"unknown header":   "colour: red\n-- capabilities.list --\n{}\n",
		"bad section":      "-- capabilities.list --\n{nope\n",
		"bad want":         "want-level: high\n-- capabilities.list --\n{}\n",
		"missing from":     "from: no/such/file.json\n",
		"json unknown key": `{"sockett":"a.sock","answers":{"capabilities.list":{}}}`,
		"json bad answer":  `{"answers":{"capabilities.list":[}}`,
	} {
		if _, err := fakehost.ParseSpec(name, []byte(src), t.TempDir()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	files, _ := filepath.Glob("../testdata/hosts/*.txtar")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(`{"socket":"x.sock","answers":{"capabilities.list":{"result":["a.b"]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := fakehost.ParseSpec("fuzz", data, t.TempDir())
		if err != nil {
			return
		}
		_, _ = fakehost.New(s)
	})
}
