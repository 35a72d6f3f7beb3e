// Command etcdserver is the etcd the tests of capmesh run against: the
// etcd server of go.etcd.io/etcd/server/v3/embed, built from this module
// of its own so that the etcd server never enters the root module's
// graph (the registry needs only the client). It takes the flag names of
// the etcd binary it stands in for (a subset), so that CAPMESH_ETCD_BIN may
// name either; internal/etcdtest builds and starts it. SIGTERM or SIGINT
// stops it cleanly.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	cfg := embed.NewConfig()
	name := flag.String("name", "default", "member name")
	dir := flag.String("data-dir", "", "data directory (required)")
	lc := flag.String("listen-client-urls", "", "client URLs to listen on")
	ac := flag.String("advertise-client-urls", "", "client URLs to advertise")
	lp := flag.String("listen-peer-urls", "", "peer URLs to listen on")
	ap := flag.String("initial-advertise-peer-urls", "", "peer URLs to advertise")
	cluster := flag.String("initial-cluster", "", "name=peerURL,… of the initial cluster")
	level := flag.String("log-level", "warn", "log level")
	certFile := flag.String("cert-file", "", "client server TLS certificate (PEM)")
	keyFile := flag.String("key-file", "", "client server TLS key (PEM)")
	caFile := flag.String("trusted-ca-file", "", "CA of the client certificates (PEM)")
	clientCertAuth := flag.Bool("client-cert-auth", false, "require client certificates signed by --trusted-ca-file")
	flag.Parse()
	if *dir == "" || *lc == "" || *lp == "" {
		log.Fatal("etcdserver: --data-dir, --listen-client-urls and --listen-peer-urls are required")
	}
	cfg.Name, cfg.Dir, cfg.LogLevel = *name, *dir, *level
	var err error
	if cfg.ListenClientUrls, err = urls(*lc); err != nil {
		log.Fatal(err)
	}
	if cfg.AdvertiseClientUrls, err = urls(or(*ac, *lc)); err != nil {
		log.Fatal(err)
	}
	if cfg.ListenPeerUrls, err = urls(*lp); err != nil {
		log.Fatal(err)
	}
	if cfg.AdvertisePeerUrls, err = urls(or(*ap, *lp)); err != nil {
		log.Fatal(err)
	}
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = *certFile, *keyFile
	cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = *caFile, *clientCertAuth
	cfg.InitialCluster = or(*cluster, *name+"="+or(*ap, *lp))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		log.Fatal("etcdserver: not ready after 60 s")
	}
	fmt.Fprintln(os.Stderr, "etcdserver: ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	select {
	case <-stop:
	case err := <-e.Err():
		log.Print(err)
	}
	e.Close()
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func urls(s string) ([]url.URL, error) {
	var out []url.URL
	for _, p := range strings.Split(s, ",") {
		u, err := url.Parse(p)
		if err != nil {
			return nil, fmt.Errorf("etcdserver: %q: %w", p, err)
		}
		out = append(out, *u)
	}
	return out, nil
}
