package main

import (
	"bytes"
	"os"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdJSONFlip tampers with a saved proof for scripts:
//
//	jsonflip FILE KEY   change the first character of the first string
//	                    value after the member KEY (inside an array too):
//	                    a hex or base64 digit becomes another digit
func cmdJSONFlip(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jsonflip FILE KEY")
	}
	path := ts.MkAbs(args[0])
	data, err := os.ReadFile(path)
	ts.Check(err)
	at := bytes.Index(data, []byte(`"`+args[1]+`":`))
	if at < 0 {
		ts.Fatalf("jsonflip: no member %q in %s", args[1], args[0])
	}
	q := bytes.IndexByte(data[at+len(args[1])+3:], '"')
	if q < 0 {
		ts.Fatalf("jsonflip: no string value after %q", args[1])
	}
	i := at + len(args[1]) + 3 + q + 1
	if data[i] == '0' {
		data[i] = '1'
	} else {
		data[i] = '0'
	}
	ts.Check(os.WriteFile(path, data, 0o644))
}
