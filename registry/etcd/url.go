package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
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
			return Options{}, urlError(raw, "want etcd://host:2379[,host:2379…][/prefix] or etcds://…")
		}
		o.TLS = true
	}
	rest, query, _ := strings.Cut(rest, "?")
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user := rest[:at]
		if strings.Contains(user, ":") {
			return Options{}, urlError(raw, "a password in the URL shows in process listings and logs: put it in a file named by password_file= (or in "+EnvPassword+")")
		}
		u, err := url.PathUnescape(user)
		if err != nil || u == "" || strings.ContainsAny(user, "@/,[]") {
			return Options{}, urlError(raw, "want user@host:port: the part before the last '@' is not a user name")
		}
		o.Username, rest = u, rest[at+1:]
	}
	hosts, path, _ := strings.Cut(rest, "/")
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return Options{}, urlError(raw, "an empty host")
		}
		if !strings.Contains(h, ":") || strings.HasSuffix(h, "]") {
			h += ":2379"
		}
		host, port, err := net.SplitHostPort(h)
		if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || host == "" {
			return Options{}, urlError(raw, "want host:port with a port number, got "+shown(raw, h))
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
		return urlError(raw, "a malformed query")
	}
	for k := range q {
		v := q.Get(k)
		switch k {
		case "node":
			o.NodeID = v
		case "node_ttl":
			if o.NodeTTL, err = time.ParseDuration(v); err != nil || o.NodeTTL <= 0 {
				return urlError(raw, "node_ttl: want a positive duration")
			}
		case "ca", "cert", "key", "password_file":
			if v == "" {
				return urlError(raw, k+": want a file name")
			}
			*map[string]*string{"ca": &o.CAFile, "cert": &o.CertFile, "key": &o.KeyFile, "password_file": &o.PasswordFile}[k] = v
		case "insecure":
			if v != "1" && v != "true" {
				return urlError(raw, "insecure: want 1 (or leave it out)")
			}
			o.Insecure = true
		default:
			return urlError(raw, "unknown parameter "+shown(raw, strconv.Quote(k))+" (node, node_ttl, ca, cert, key, password_file, insecure)")
		}
	}
	return nil
}

// urlError is ParseURL's error: the URL redacted, then why.
func urlError(raw, why string) error {
	return fmt.Errorf("registry/etcd: %s: %s", redact(raw), why)
}

// redact is raw for an error message: everything before the last '@'
// after the scheme hidden, since a password may hold any character
// (':', '/', '?', '@', ','); raw itself when it has no '@' (no user
// info, so no password).
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	at := strings.LastIndexByte(rest, '@')
	if !ok || at < 0 {
		return strconv.Quote(raw)
	}
	return strconv.Quote(scheme + "://***" + rest[at:])
}

// shown is part of raw for an error message: part when raw has no '@'
// (so no password), else a mention that it is hidden.
func shown(raw, part string) string {
	if strings.Contains(raw, "@") {
		return "(a part hidden: the URL has user info)"
	}
	return part
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
