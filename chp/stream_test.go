package chp

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// TestChunkSeqDigestVector pins chp-chunk-seq-v1 to the upstream vector
// (spec/test-vectors/chunk-seq.json: non-ASCII text, nested keys).
func TestChunkSeqDigestVector(t *testing.T) {
	raw, err := os.ReadFile("testdata/chunk-seq.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Digest string            `json:"chunk_seq_digest"`
		Deltas []json.RawMessage `json:"deltas"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	got, err := ChunkSeqDigest(v.Deltas)
	if err != nil {
		t.Fatal(err)
	}
	if got != v.Digest {
		t.Fatalf("digest %s, vector %s", got, v.Digest)
	}
	// Order matters.
	v.Deltas[0], v.Deltas[2] = v.Deltas[2], v.Deltas[0]
	if got, _ := ChunkSeqDigest(v.Deltas); got == v.Digest {
		t.Fatal("reordered deltas kept the digest")
	}
}

// TestVerifyChunkSeq: the committed digest verifies the delivered chunks;
// a tampered, dropped or extra chunk fails; a payload committing no stream
// is an error.
func TestVerifyChunkSeq(t *testing.T) {
	deltas := []json.RawMessage{json.RawMessage(`"s1"`), json.RawMessage(`"s2"`), json.RawMessage(`{"b":1,"a":[true,null]}`)}
	d, err := ChunkSeqDigest(deltas)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{ChunkCountKey: 3, ChunkSeqDigestKey: d})
	if err := VerifyChunkSeq(payload, deltas); err != nil {
		t.Fatalf("genuine sequence: %v", err)
	}
	// Whitespace and key order are not content.
	same := []json.RawMessage{json.RawMessage(` "s1"`), deltas[1], json.RawMessage(`{"a": [true, null], "b": 1}`)}
	if err := VerifyChunkSeq(payload, same); err != nil {
		t.Fatalf("re-encoded sequence: %v", err)
	}
	for name, bad := range map[string][]json.RawMessage{
		"tampered": {deltas[0], json.RawMessage(`"s2!"`), deltas[2]},
		"dropped":  deltas[:2],
		"extra":    append(append([]json.RawMessage{}, deltas...), json.RawMessage(`"s4"`)),
	} {
		if err := VerifyChunkSeq(payload, bad); !errors.Is(err, ErrChunkSeqMismatch) {
			t.Errorf("%s: %v, want ErrChunkSeqMismatch", name, err)
		}
	}
	if err := VerifyChunkSeq(json.RawMessage(`{}`), deltas); err == nil {
		t.Error("a payload without a digest verified a stream")
	}
	if _, err := ChunkSeqDigest([]json.RawMessage{json.RawMessage(`{`)}); err == nil {
		t.Error("a malformed delta was digested")
	}
}

// FuzzVerifyChunkSeq: any committed payload and chunk log either verify
// or fail with an error, never a panic; whatever verifies is the log whose
// digest was committed (a log verifies against its own digest).
func FuzzVerifyChunkSeq(f *testing.F) {
	f.Add([]byte(`{"chunk_count":1,"chunk_seq_digest":"00"}`), []byte(`"s1"`), []byte(`"s2"`))
	f.Add([]byte(`{"chunk_count":2}`), []byte(`{"a":1.5}`), []byte(`[1,"é"]`))
	f.Add([]byte(`[]`), []byte(`{`), []byte(`null`))
	f.Fuzz(func(t *testing.T, payload, d1, d2 []byte) {
		deltas := []json.RawMessage{d1, d2}
		err := VerifyChunkSeq(payload, deltas)
		digest, derr := ChunkSeqDigest(deltas)
		if err == nil && derr != nil {
			t.Fatalf("verified undigestable chunks: %v", derr)
		}
		if derr != nil {
			return
		}
		own, _ := json.Marshal(map[string]any{ChunkCountKey: 2, ChunkSeqDigestKey: digest})
		if err := VerifyChunkSeq(own, deltas); err != nil {
			t.Fatalf("a log does not verify against its own digest: %v", err)
		}
	})
}
