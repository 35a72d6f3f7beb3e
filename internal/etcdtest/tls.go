package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are the PEM files of a server started by StartTLS, in its
// directory: the certificate authority that signed the server's
// certificate and the clients', and one client certificate with its key.
type TLSFiles struct {
	CA         string
	ClientCert string
	ClientKey  string
	// Other is a certificate authority that signed nothing of the server's.
	Other string

	serverCert, serverKey string
}

// StartTLS is Start for a member that serves its clients over TLS only,
// with a certificate of a fresh private CA (for 127.0.0.1 and localhost),
// and requires a client certificate signed by that CA (etcd's
// --client-cert-auth). Its client certificate's common name is "root",
// the user etcd's authentication takes it for.
func StartTLS(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	var s *Server
	if err == nil {
		if s, err = startTLS(bin); err == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("etcd required (%s=1) but not available: %v", EnvRequire, err)
	}
	t.Skipf("etcd not available, skipping: %v", err)
	return nil
}

// TLS returns the PEM files of a server started by StartTLS, nil for
// one started by Start.
func (s *Server) TLS() *TLSFiles { return s.tls }

func startTLS(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "capmesh-etcd-tls-")
	if err != nil {
		return nil, err
	}
	files, err := writeTLS(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return startIn(bin, dir, files)
}

// writeTLS creates a CA, a server certificate and a client certificate
// signed by it, and a second CA, as PEM files in dir.
func writeTLS(dir string) (*TLSFiles, error) {
	f := &TLSFiles{CA: filepath.Join(dir, "ca.pem"), ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
		Other: filepath.Join(dir, "other-ca.pem"), serverCert: filepath.Join(dir, "server.pem"), serverKey: filepath.Join(dir, "server-key.pem")}
	ca, caKey, err := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "capmesh test CA"}, IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}, nil, nil, f.CA, "")
	if err != nil {
		return nil, err
	}
	if _, _, err := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "other CA"}, IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}, nil, nil, f.Other, ""); err != nil {
		return nil, err
	}
	// etcd dials itself (its gateway) with the server certificate, so it
	// serves client authentication too.
	server := &x509.Certificate{Subject: pkix.Name{CommonName: "etcd"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if _, _, err := issue(server, ca, caKey, f.serverCert, f.serverKey); err != nil {
		return nil, err
	}
	client := &x509.Certificate{Subject: pkix.Name{CommonName: "root"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, _, err := issue(client, ca, caKey, f.ClientCert, f.ClientKey); err != nil {
		return nil, err
	}
	return f, nil
}

// issue signs tmpl with parent's key (self-signed when parent is nil),
// writes the certificate to certFile and, when keyFile is set, its key.
func issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("etcdtest: certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, nil, err
	}
	if keyFile != "" {
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
			return nil, nil, err
		}
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// httpClient is the client of the server's HTTP endpoints (/health, the
// JSON gateway): with the CA and the client certificate of a TLS server.
func (s *Server) httpClient() (*http.Client, string) {
	if s.tls == nil {
		return &http.Client{Timeout: 2 * time.Second}, "http://"
	}
	pool := x509.NewCertPool()
	if b, err := os.ReadFile(s.tls.CA); err == nil {
		pool.AppendCertsFromPEM(b)
	}
	kp, _ := tls.LoadX509KeyPair(s.tls.ClientCert, s.tls.ClientKey)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}}
	return &http.Client{Timeout: 2 * time.Second, Transport: tr}, "https://"
}
