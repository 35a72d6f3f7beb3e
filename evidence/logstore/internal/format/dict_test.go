package format_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/evidence/logstore/internal/format"
	"github.com/capmesh/capmesh/evidence/logstore/internal/packed"
	"github.com/klauspost/compress/s2"
)

var writeDict = flag.Bool("write-dictionary", false, "regenerate dict/events-v1.bin (never for a dictionary that has shipped)")

// dictV1SHA256 pins the bytes of dictionary 1: a block compressed with it
// can only be read with exactly these bytes, so they may never change (a
// new dictionary gets a new id).
const dictV1SHA256 = "5bbb86a4013b312cd965dd263ddba393e233ce2db7eadd07de7a908dcddf8b42"

// TestDictionaryFrozen: dictionary 1 is byte for byte the one every
// compressed store written with it needs.
func TestDictionaryFrozen(t *testing.T) {
	if *writeDict {
		writeDictionary(t, "dict/events-v1.bin")
	}
	b, err := os.ReadFile("dict/events-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != dictV1SHA256 {
		t.Fatalf("dict/events-v1.bin changed (sha256 %x): stores compressed with dictionary 1 would no longer read", sum)
	}
}

// writeDictionary writes the raw records (version 1 encoding) of one
// safety-gated successful invocation of a conformance fixture: its five
// events and its result. A dictionary of every outcome (26 KB) compressed
// no better and cost more CPU to load per block, compressing and
// decompressing.
func writeDictionary(t *testing.T, path string) {
	dir := t.TempDir()
	s, err := logstore.Open(dir, &logstore.Options{NoSync: true, Uncompressed: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := boundary.New(boundary.Config{HostID: "host", Store: s, Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	if err := boundary.RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ capID, payload string }{
		{"conformance.echo", `{"value":"x"}`},
	} {
		env := &chp.InvocationEnvelope{CapabilityID: c.capID, Payload: json.RawMessage(c.payload),
			Correlation: chp.CorrelationContext{CorrelationID: fmt.Sprint("corr-", i)}}
		if _, err := b.Invoke(context.Background(), env); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// With NoSync the store prepares no zeros ahead: the file is its data.
	data, err := os.ReadFile(filepath.Join(dir, logstore.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

var writeDictV3 = flag.Bool("write-s2-dictionary", false, "regenerate dict/events-v3.s2 (never for a dictionary that has shipped)")

// dictV3SHA256 pins the bytes of dictionary 3, as dictV1SHA256 those of
// dictionary 1.
const dictV3SHA256 = "81cec9d3329b26ef1dc9a21d7c30962050e9da539719707a17a2f776332ec91b"

// TestDictionaryV3Frozen: dictionary 3 is byte for byte the one every
// store written with it needs: the S2 dictionary of dictionary 1's
// records, packed.
func TestDictionaryV3Frozen(t *testing.T) {
	if *writeDictV3 {
		d := s2.MakeDict(packed.Append(nil, format.DictionaryV1()), nil)
		if err := os.WriteFile("dict/events-v3.s2", d.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("dict/events-v3.s2")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != dictV3SHA256 {
		t.Fatalf("dict/events-v3.s2 changed (sha256 %x): stores compressed with dictionary 3 would no longer read", sum)
	}
}
