// Command gen regenerates the collation data of package collate from the
// Node.js found on PATH (go generate in canonical/collate runs it). It runs
// extract.mjs, which copies ICU's root collation data out of the Node binary
// and derives the NFD tables through String.prototype.normalize, then
// recompresses the collation data and writes everything next to the
// package. Regenerate the fidelity corpus afterwards with
//
//	go test ./canonical/collate -run TestRegenerateOracle -regen-oracle
//
// The generator refuses to run under a Node whose ICU or Unicode version
// differs from the pinned target unless -any-node is given, because the
// fingerprints must match what the reference computes under Node 20.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

const (
	wantICU     = "78.2"
	wantUnicode = "17.0"
)

func main() {
	anyNode := flag.Bool("any-node", false, "accept a Node.js with a different ICU version")
	out := flag.String("out", ".", "directory of package collate")
	flag.Parse()
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "extract.mjs")
	tmp, err := os.MkdirTemp("", "collate-gen")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("node", script, tmp)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("node extract.mjs: %v", err)
	}
	var v struct{ ICU, Unicode string }
	vb, err := os.ReadFile(filepath.Join(tmp, "versions.json"))
	if err != nil {
		log.Fatal(err)
	}
	if err := json.Unmarshal(vb, &v); err != nil {
		log.Fatal(err)
	}
	if (v.ICU != wantICU || v.Unicode != wantUnicode) && !*anyNode {
		log.Fatalf("node has ICU %s / Unicode %s, want %s / %s (Node.js v20.20.2); use -any-node to override", v.ICU, v.Unicode, wantICU, wantUnicode)
	}
	// Recompress with Go's best gzip level: deterministic output (no name,
	// zero mtime) and smaller than Node's zlib.
	raw, err := readGz(filepath.Join(tmp, "ucadata.icu.gz"))
	if err != nil {
		log.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(raw)
	zw.Close()
	write(filepath.Join(*out, "ucadata.icu.gz"), buf.Bytes())
	nb, err := os.ReadFile(filepath.Join(tmp, "norm.bin"))
	if err != nil {
		log.Fatal(err)
	}
	write(filepath.Join(*out, "norm.bin"), nb)
	write(filepath.Join(*out, "testdata", "versions.json"), vb)
	fmt.Printf("collate data: ICU %s, Unicode %s, ucadata %d bytes (%d gzipped), norm %d bytes\n", v.ICU, v.Unicode, len(raw), buf.Len(), len(nb))
}

func readGz(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func write(path string, b []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		log.Fatal(err)
	}
}
