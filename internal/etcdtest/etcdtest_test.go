package etcdtest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
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

// TestStartTLS: a TLS server answers a client holding the client
// certificate its CA signed, and no one else: not plaintext HTTP, not
// TLS without a client certificate, not a client that trusts another CA.
func TestStartTLS(t *testing.T) {
	s := StartTLS(t)
	f := s.TLS()
	if f == nil || !strings.HasPrefix(s.URL(), "etcds://") {
		t.Fatalf("TLS() = %v, URL() = %s", f, s.URL())
	}
	if s.Revision(t) == 0 {
		t.Error("revision 0")
	}
	if resp, err := http.Get("http://" + s.Endpoints()[0] + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plaintext /health answered 200")
		}
	}
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(f.CA)
	pool.AppendCertsFromPEM(b)
	other := x509.NewCertPool()
	b, _ = os.ReadFile(f.Other)
	other.AppendCertsFromPEM(b)
	kp, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*tls.Config{
		"no client certificate": {RootCAs: pool},
		"another CA":            {RootCAs: other, Certificates: []tls.Certificate{kp}},
	} {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := hc.Get("https://" + s.Endpoints()[0] + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("%s: /health answered 200", name)
			}
		}
	}
}
