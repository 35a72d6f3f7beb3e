package etcdtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"testing"
)

// kv puts or reads a key through etcd's JSON gateway (/v3/kv/*).
func kv(t *testing.T, s *Server, op string, body map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post("http://"+s.Endpoints()[0]+"/v3/kv/"+op, "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp, out
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestStartPauseResumeStop: the server serves, keeps its data across
// Pause and Resume on the same address, is unreachable while paused, and
// Stop removes its directory.
func TestStartPauseResumeStop(t *testing.T) {
	s := Start(t)
	if resp, _ := kv(t, s, "put", map[string]string{"key": b64("k"), "value": b64("v")}); resp == nil || resp.StatusCode != 200 {
		t.Fatalf("put: %v", resp)
	}
	s.Pause()
	if resp, _ := kv(t, s, "range", map[string]string{"key": b64("k")}); resp != nil {
		t.Fatalf("a paused server answered: %v", resp.Status)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	_, out := kv(t, s, "range", map[string]string{"key": b64("k")})
	kvs, _ := out["kvs"].([]any)
	if len(kvs) != 1 || kvs[0].(map[string]any)["value"] != b64("v") {
		t.Fatalf("after resume: %v", out)
	}
	s.Stop()
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("Stop left %s: %v", s.dir, err)
	}
	s.Stop() // twice is harmless
}

// TestBinaryFromEnv: CAPMESH_ETCD_BIN names the server; a missing file is
// an error that names the variable.
func TestBinaryFromEnv(t *testing.T) {
	t.Setenv(EnvBin, "/nonexistent/etcd")
	if _, err := Binary(); err == nil || !bytes.Contains([]byte(err.Error()), []byte(EnvBin)) {
		t.Errorf("Binary() = %v, want an error naming %s", err, EnvBin)
	}
}
