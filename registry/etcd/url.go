package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/capmesh/capmesh/registry"
)

// ParseURL reads a registry URL into Options:
//
//	etcd://host:port[,host:port…][/prefix][?query]
//	etcds://[user@]host:port[,host:port…][/prefix][?query]
//
// etcd:// is plaintext, etcds:// TLS. A host without a port gets 2379;
// the path, when there is one, is the key prefix (with a trailing /).
// Query parameters: node=<id> (NodeID), node_ttl=<duration> (NodeTTL),
// and for etcds:// ca=, cert=, key= (PEM files: CAFile, CertFile,
// KeyFile) and password_file= (PasswordFile); insecure=1 (Insecure).
// The user of etcd's authentication is the URL's user; a password in the
// URL is refused (it would show in process listings and logs): it comes
// from password_file= or the environment (EnvPassword). ParseURL reads
// no file; Open checks the combination.
func ParseURL(raw string) (Options, error) {
	var o Options
	rest, ok := strings.CutPrefix(raw, "etcd://")
	if !ok {
		if rest, ok = strings.CutPrefix(raw, "etcds://"); !ok {
			return Options{}, fmt.Errorf("registry/etcd: %q: want etcd://host:2379[,host:2379…][/prefix] or etcds://…", raw)
		}
		o.TLS = true
	}
	rest, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	if user, h, ok := strings.Cut(hosts, "@"); ok {
		if strings.Contains(user, ":") {
			return Options{}, fmt.Errorf("registry/etcd: %s: a password in the URL shows in process listings and logs: put it in a file named by password_file= (or in %s)", redact(raw), EnvPassword)
		}
		u, err := url.PathUnescape(user)
		if err != nil || u == "" {
			return Options{}, fmt.Errorf("registry/etcd: %q: bad user %q", raw, user)
		}
		o.Username, hosts = u, h
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return Options{}, fmt.Errorf("registry/etcd: %q: an empty host", raw)
		}
		if !strings.Contains(h, ":") || strings.HasSuffix(h, "]") {
			h += ":2379"
		}
		o.Endpoints = append(o.Endpoints, h)
	}
	if path != "" {
		o.Prefix = "/" + strings.TrimSuffix(path, "/") + "/"
	}
	if err := o.parseQuery(raw, query); err != nil {
		return Options{}, err
	}
	return o, nil
}

// parseQuery reads the query parameters of ParseURL into o.
func (o *Options) parseQuery(raw, query string) error {
	q, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("registry/etcd: %q: %w", raw, err)
	}
	for k := range q {
		v := q.Get(k)
		switch k {
		case "node":
			o.NodeID = v
		case "node_ttl":
			if o.NodeTTL, err = time.ParseDuration(v); err != nil || o.NodeTTL <= 0 {
				return fmt.Errorf("registry/etcd: %q: node_ttl: want a positive duration", raw)
			}
		case "ca", "cert", "key", "password_file":
			if v == "" {
				return fmt.Errorf("registry/etcd: %q: %s: want a file name", raw, k)
			}
			*map[string]*string{"ca": &o.CAFile, "cert": &o.CertFile, "key": &o.KeyFile, "password_file": &o.PasswordFile}[k] = v
		case "insecure":
			if v != "1" && v != "true" {
				return fmt.Errorf("registry/etcd: %q: insecure: want 1 (or leave it out)", raw)
			}
			o.Insecure = true
		default:
			return fmt.Errorf("registry/etcd: %q: unknown parameter %q (node, node_ttl, ca, cert, key, password_file, insecure)", raw, k)
		}
	}
	return nil
}

// redact hides the password of a URL's user for an error message.
func redact(raw string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	user, hosts, ok := strings.Cut(rest, "@")
	if !ok {
		return raw
	}
	name, _, _ := strings.Cut(user, ":")
	return scheme + "://" + name + ":***@" + hosts
}

func init() {
	open := func(ctx context.Context, url string, log *slog.Logger) (registry.Store, error) {
		o, err := ParseURL(url)
		if err != nil {
			return nil, err
		}
		o.Logger = log
		return Open(ctx, o)
	}
	registry.RegisterStore("etcd", open)
	registry.RegisterStore("etcds", open)
}
