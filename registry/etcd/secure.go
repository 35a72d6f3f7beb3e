package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EnvPassword holds the password of Options.Username when neither
// Options.Password nor Options.PasswordFile gives it.
const EnvPassword = "CAPMESH_ETCD_PASSWORD"

// clientConfig checks the connection options and turns them into the
// etcd client's configuration: TLS with its files loaded, the user's
// password read, and the loopback rule applied (see Options.Insecure).
func (o *Options) clientConfig() (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: o.Endpoints, DialTimeout: o.DialTimeout, Logger: quietLogger()}
	if !o.TLS && (o.CAFile != "" || o.CertFile != "" || o.KeyFile != "") {
		return cfg, errors.New("registry/etcd: ca, cert and key are TLS settings: use etcds://")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return cfg, errors.New("registry/etcd: a client certificate needs both cert and key")
	}
	if o.TLS {
		t, err := o.tlsConfig()
		if err != nil {
			return cfg, err
		}
		cfg.TLS = t
		cfg.Endpoints = make([]string, len(o.Endpoints))
		for i, ep := range o.Endpoints {
			if _, hp, ok := strings.Cut(ep, "://"); ok {
				ep = hp
			}
			cfg.Endpoints[i] = "https://" + ep
		}
	}
	if err := o.password(); err != nil {
		return cfg, err
	}
	cfg.Username, cfg.Password = o.Username, o.Password
	if err := o.checkExposure(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// tlsConfig loads the CA and the client certificate.
func (o *Options) tlsConfig() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("registry/etcd: ca: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("registry/etcd: ca: %s holds no PEM certificate", o.CAFile)
		}
	}
	if o.CertFile != "" {
		kp, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("registry/etcd: client certificate: %w", err)
		}
		t.Certificates = []tls.Certificate{kp}
	}
	return t, nil
}

// password fills in Password from PasswordFile or the environment when
// there is a user, and refuses a password without one.
func (o *Options) password() error {
	if o.Username == "" {
		if o.Password != "" || o.PasswordFile != "" {
			return errors.New("registry/etcd: a password without a user: name the user in the URL (etcds://user@host)")
		}
		return nil
	}
	switch {
	case o.Password != "":
	case o.PasswordFile != "":
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return fmt.Errorf("registry/etcd: password_file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		o.Password = strings.TrimSuffix(line, "\r")
	default:
		o.Password = os.Getenv(EnvPassword)
	}
	if o.Password == "" {
		return fmt.Errorf("registry/etcd: user %q has no password: set password_file= or %s", o.Username, EnvPassword)
	}
	return nil
}

// checkExposure refuses, unless Insecure, to talk to an endpoint beyond
// loopback in plaintext, or over TLS without authenticating the node (a
// client certificate or a user): anyone who can reach such an etcd could
// rewrite the registry, and a plaintext one could be read and forged on
// the way.
func (o *Options) checkExposure() error {
	if o.Insecure {
		return nil
	}
	for _, ep := range o.Endpoints {
		if loopback(ep) {
			continue
		}
		if !o.TLS {
			return fmt.Errorf("registry/etcd: %s is not a loopback address: connect over TLS (etcds://) with a client certificate or a user, or accept plaintext with insecure=1", ep)
		}
		if o.CertFile == "" && o.Username == "" {
			return fmt.Errorf("registry/etcd: %s is not a loopback address: authenticate the node with a client certificate (cert=, key=) or a user (etcds://user@host, password_file=), or accept an unauthenticated connection with insecure=1", ep)
		}
	}
	return nil
}

// loopback reports whether an etcd endpoint (host:port, maybe with a
// scheme) is on the loopback interface: a loopback IP or localhost.
func loopback(ep string) bool {
	if _, rest, ok := strings.Cut(ep, "://"); ok {
		ep = rest
	}
	host, _, err := net.SplitHostPort(ep)
	if err != nil {
		host = ep
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
