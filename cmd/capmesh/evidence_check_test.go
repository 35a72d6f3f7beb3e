package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// cmdEvidenceLog makes and damages evidence stores for scripts:
//
//	evidencelog write DIR N     N records through the store API (bodies
//	                            payload-0001…, correlations c0–c2, a result
//	                            after the first), each made durable,
//	                            uncompressed (format version 1) so that
//	                            flip and tear find them by their text
//	evidencelog writez DIR N    the same, compressed (the default format):
//	                            each record in a block of its own
//	evidencelog flip DIR TEXT   flip one bit of the first byte of TEXT
//	evidencelog flipmid DIR _   flip one bit of the middle byte of the data
//	evidencelog tear DIR TEXT   cut the log in the middle of TEXT, as a
//	                            write cut short by SIGKILL leaves it
func cmdEvidenceLog(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: evidencelog write|flip|tear DIR ARG")
	}
	dir := ts.MkAbs(args[1])
	path := filepath.Join(dir, logstore.FileName)
	switch args[0] {
	case "write", "writez":
		n, err := strconv.Atoi(args[2])
		ts.Check(err)
		s, err := logstore.Open(dir, &logstore.Options{Uncompressed: args[0] == "write"})
		ts.Check(err)
		ctx := context.Background()
		for i := range n {
			recs, err := s.Append(ctx, storetest.Event(fmt.Sprint("c", i%3), "execution_started", fmt.Sprintf("payload-%04d", i+1)))
			ts.Check(err)
			if i == 0 {
				ts.Check(s.PutResult(ctx, evidence.Result{InvocationID: "inv-1", At: time.Now(), Data: []byte(`{}`)}))
			}
			ts.Check(s.Sync(ctx, recs[0].Sequence))
		}
		ts.Check(s.Close())
	case "flipmid":
		data, err := os.ReadFile(path)
		ts.Check(err)
		end := len(bytes.TrimRight(data, "\x00")) // the data, without the zeros kept ahead
		data[end/2] ^= 0x20
		ts.Check(os.WriteFile(path, data, 0o600))
	case "flip", "tear":
		data, err := os.ReadFile(path)
		ts.Check(err)
		i := bytes.Index(data, []byte(args[2]))
		if i < 0 {
			ts.Fatalf("%q not in %s", args[2], path)
		}
		if args[0] == "tear" {
			ts.Check(os.Truncate(path, int64(i+len(args[2])/2)))
			return
		}
		data[i] ^= 0x20
		ts.Check(os.WriteFile(path, data, 0o600))
	default:
		ts.Fatalf("evidencelog: unknown action %q", args[0])
	}
}
