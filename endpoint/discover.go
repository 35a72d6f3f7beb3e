package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
)

// Query names what a client wants to reach: a provider of Method, or the
// primal called Primal, or both.
type Query struct {
	// Method is the method to call ("kv.seal"); its domain ("kv") selects
	// the domain steps of the discovery order.
	Method string
	// Primal is the primal to reach, when the caller knows it.
	Primal string
	// Route: at the registry step, call through a capmesh node (which
	// routes the method to a provider) instead of asking it for the
	// provider's endpoint. Songbird does not route; it is always asked.
	Route bool
	// RouterFirst moves the registry step right after the environment, so
	// that a running node stays the default route (capmesh call); the
	// filesystem steps then serve when no registry runs.
	RouterFirst bool
	// NoRegistry skips the registry step and NoTCP the TCP fallback: a
	// node routing a call it has no registered provider for searches only
	// the environment and its own socket directory (it is the registry).
	NoRegistry, NoTCP bool
	// ProbeTimeout bounds each connection attempt. Default 2 s.
	ProbeTimeout time.Duration
}

// Found is a reachable endpoint and the discovery step that found it.
type Found struct {
	Addr Address
	// Via names the step: "env KV_SOCKET", "socket kvhost.sock",
	// "domain symlink kv.sock", "socket directory", "registry capmesh.sock",
	// "tcp fallback KV_TCP".
	Via string
}

// Steps of the discovery order, for the messages of NotFoundError.
const (
	viaEnv       = "env "
	viaSocket    = "socket "
	viaSymlink   = "domain symlink "
	viaDirectory = "socket directory"
	viaRegistry  = "registry "
	viaTCP       = "tcp fallback "
)

// NotFoundError says that no step of the discovery order reached a
// provider, and what each step saw.
type NotFoundError struct {
	Query Query
	Tried []string
}

// Error lists the steps tried.
func (e *NotFoundError) Error() string {
	what := e.Query.Method
	if e.Query.Primal != "" {
		what = strings.TrimSpace(e.Query.Primal + " " + what)
	}
	return fmt.Sprintf("no provider of %s found: tried %s", what, strings.Join(e.Tried, "; "))
}

// Domain returns the domain of a method name: "kv" for "kv.seal", "" for a
// name without a dot.
func Domain(method string) string {
	d, _, ok := strings.Cut(method, ".")
	if !ok {
		return ""
	}
	return d
}

// Discover finds and connects to a provider in the order of the Primal IPC
// Protocol, each step skipped when it does not apply:
//
//  1. the environment: $<PRIMAL>_SOCKET, then $<DOMAIN>_SOCKET (a path or
//     any address Parse accepts);
//  2. the primal's socket: <primal>-<FAMILY_ID>.sock when family-scoped,
//     else <primal>.sock;
//  3. the domain symlink: <domain>-<FAMILY_ID>.sock or <domain>.sock;
//  4. the socket directory: every other socket of the same scope whose
//     capabilities.list names the method (or whose identity is the primal);
//  5. the registry: $DISCOVERY_SOCKET, else capmesh.sock then songbird.sock
//     (family-scoped names when family-scoped) — ipc.resolve, or with
//     Query.Route a capmesh node itself;
//  6. TCP: $<PRIMAL>_TCP, $<DOMAIN>_TCP (host:port), then
//     $<PRIMAL>_PORT, $<DOMAIN>_PORT (a port on 127.0.0.1).
//
// Families never mix: a family-scoped process sees only its family's
// sockets and registry, a standalone one only unscoped ones. The returned
// caller is the open connection; the caller closes it.
func Discover(ctx context.Context, q Query) (jsonrpc.Caller, Found, error) {
	if q.ProbeTimeout <= 0 {
		q.ProbeTimeout = 2 * time.Second
	}
	if q.Primal != "" {
		if err := ValidateName(q.Primal); err != nil {
			return nil, Found{}, err
		}
	}
	d := &discovery{q: q, domain: Domain(q.Method), tried: map[string]bool{}}
	dir, _, err := SocketDir()
	if err != nil {
		return nil, Found{}, err
	}
	d.dir = dir
	steps := []func(context.Context) (jsonrpc.Caller, Found, bool){d.env, d.names, d.scan, d.registry, d.tcp}
	if q.RouterFirst {
		steps = []func(context.Context) (jsonrpc.Caller, Found, bool){d.env, d.registry, d.names, d.scan, d.tcp}
	}
	if q.NoRegistry || q.NoTCP {
		steps = []func(context.Context) (jsonrpc.Caller, Found, bool){d.env, d.names, d.scan}
		if !q.NoRegistry {
			steps = append(steps, d.registry)
		}
		if !q.NoTCP {
			steps = append(steps, d.tcp)
		}
	}
	for _, step := range steps {
		if c, f, ok := step(ctx); ok {
			return c, f, nil
		}
		if ctx.Err() != nil {
			return nil, Found{}, ctx.Err()
		}
	}
	return nil, Found{}, &NotFoundError{Query: q, Tried: d.log}
}

type discovery struct {
	q      Query
	domain string
	dir    string
	tried  map[string]bool // socket paths already tried
	log    []string
}

func (d *discovery) note(via string, err error) {
	d.log = append(d.log, via+": "+err.Error())
}

// try connects to a, recording the attempt under via.
func (d *discovery) try(ctx context.Context, a Address, via string) (jsonrpc.Caller, Found, bool) {
	if a.Scheme == "unix" {
		d.tried[a.Path] = true
		if _, err := os.Stat(a.Path); err != nil {
			d.note(via, errors.New("no socket"))
			return nil, Found{}, false
		}
	}
	cctx, cancel := context.WithTimeout(ctx, d.q.ProbeTimeout)
	defer cancel()
	c, err := DialAddress(cctx, a, nil)
	if err != nil {
		d.note(via, err)
		return nil, Found{}, false
	}
	return c, Found{Addr: a, Via: via}, true
}

// envNames are the names whose variables apply: the primal's, then the
// domain's.
func (d *discovery) envNames() []string {
	var out []string
	for _, n := range []string{d.q.Primal, d.domain} {
		if n != "" && !slices.Contains(out, envKey(n)) {
			out = append(out, envKey(n))
		}
	}
	return out
}

func (d *discovery) env(ctx context.Context) (jsonrpc.Caller, Found, bool) {
	for _, k := range d.envNames() {
		v := os.Getenv(k + "_SOCKET")
		if v == "" {
			continue
		}
		a, err := Parse(v)
		if err != nil && strings.HasPrefix(v, "/") {
			a, err = unixAddr(v)
		}
		if err != nil {
			d.note(viaEnv+k+"_SOCKET", err)
			continue
		}
		if c, f, ok := d.try(ctx, a, viaEnv+k+"_SOCKET"); ok {
			return c, f, true
		}
	}
	return nil, Found{}, false
}

// names tries the primal's socket, then the domain symlink.
func (d *discovery) names(ctx context.Context) (jsonrpc.Caller, Found, bool) {
	if d.q.Primal != "" {
		n := SocketName(d.q.Primal)
		if c, f, ok := d.try(ctx, Address{Scheme: "unix", Path: filepath.Join(d.dir, n)}, viaSocket+n); ok {
			return c, f, true
		}
	}
	if d.domain != "" && ValidateName(d.domain) == nil && !reservedDomain(d.domain) {
		n := SocketName(d.domain)
		if c, f, ok := d.try(ctx, Address{Scheme: "unix", Path: filepath.Join(d.dir, n)}, viaSymlink+n); ok {
			return c, f, true
		}
	}
	return nil, Found{}, false
}

// reservedDomain: namespaces every primal answers (health.*, identity.*),
// whose "domain symlink" would name no provider in particular.
func reservedDomain(d string) bool {
	switch d {
	case "health", "identity", "capabilities", "capability", "lifecycle", "rpc", "ipc", "registry", "chp":
		return true
	}
	return false
}

// maxScan bounds the sockets the directory step probes.
const maxScan = 64

// inScope reports whether a socket file name belongs to this process's
// scope: <x>-<FAMILY_ID>.sock when family-scoped; when standalone, a name
// without '-', since <primal>-<family>.sock cannot be told from a
// hyphenated primal name (that primal is still found by name, symlink or
// registry).
func inScope(name string) bool {
	base, ok := strings.CutSuffix(name, ".sock")
	if !ok || base == "" {
		return false
	}
	if f := FamilyID(); f != "" {
		return strings.HasSuffix(base, "-"+f) && len(base) > len(f)+1
	}
	return !strings.Contains(base, "-")
}

func (d *discovery) scan(ctx context.Context) (jsonrpc.Caller, Found, bool) {
	if d.q.Method == "" && d.q.Primal == "" {
		return nil, Found{}, false
	}
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		d.note(viaDirectory, err)
		return nil, Found{}, false
	}
	var paths []string
	for _, e := range ents {
		p := filepath.Join(d.dir, e.Name())
		if !inScope(e.Name()) || d.tried[p] || isRegistryName(e.Name()) {
			continue
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
			continue
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if len(paths) > maxScan {
		paths = paths[:maxScan]
	}
	for _, p := range paths {
		a := Address{Scheme: "unix", Path: p}
		c, f, ok := d.try(ctx, a, viaDirectory)
		if !ok {
			continue
		}
		if d.provides(ctx, c) {
			f.Via = viaDirectory + " (" + filepath.Base(p) + ")"
			return c, f, true
		}
		c.Close()
	}
	d.note(viaDirectory, fmt.Errorf("%d socket(s), none provides it", len(paths)))
	return nil, Found{}, false
}

// provides asks a host whether it is the wanted primal or lists the method.
func (d *discovery) provides(ctx context.Context, c jsonrpc.Caller) bool {
	cctx, cancel := context.WithTimeout(ctx, d.q.ProbeTimeout)
	defer cancel()
	var env struct {
		Primal  string            `json:"primal"`
		Methods []json.RawMessage `json:"methods"`
	}
	if err := c.Call(cctx, "capabilities.list", nil, &env); err != nil {
		return false
	}
	if d.q.Primal != "" {
		return strings.EqualFold(env.Primal, d.q.Primal)
	}
	for _, m := range env.Methods {
		var s string
		var o struct {
			Name   string `json:"name"`
			Method string `json:"method"`
		}
		if json.Unmarshal(m, &s) != nil && json.Unmarshal(m, &o) == nil {
			s = nonEmptyStr(o.Name, o.Method)
		}
		if s == d.q.Method {
			return true
		}
	}
	return false
}

func nonEmptyStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// registryNames are the registries a client asks, in order.
var registryNames = []string{"capmesh", "songbird"}

func isRegistryName(file string) bool {
	for _, n := range registryNames {
		if file == SocketName(n) || file == n+".sock" {
			return true
		}
	}
	return false
}

// RegistryCandidates returns where a client looks for a registry:
// $DISCOVERY_SOCKET, else capmesh.sock then songbird.sock in dir
// (capmesh-<FAMILY_ID>.sock, songbird-<FAMILY_ID>.sock when family-scoped).
func RegistryCandidates(dir string) []Address {
	if v := os.Getenv("DISCOVERY_SOCKET"); v != "" {
		if a, err := Parse(v); err == nil {
			return []Address{a}
		}
		return []Address{{Scheme: "unix", Path: v}}
	}
	var out []Address
	for _, n := range registryNames {
		out = append(out, Address{Scheme: "unix", Path: filepath.Join(dir, SocketName(n))})
	}
	return out
}

func (d *discovery) registry(ctx context.Context) (jsonrpc.Caller, Found, bool) {
	for _, a := range RegistryCandidates(d.dir) {
		via := viaRegistry + filepath.Base(a.DialAddr())
		c, f, ok := d.try(ctx, a, via)
		if !ok {
			continue
		}
		isNode := strings.HasPrefix(filepath.Base(a.Path), "capmesh")
		if d.q.Route && isNode && d.q.Method != "" {
			return c, f, true // the node routes the call
		}
		ep, err := d.resolve(ctx, c)
		c.Close()
		if err != nil {
			d.note(via, err)
			continue
		}
		pa, err := Parse(ep)
		if err != nil {
			d.note(via, err)
			continue
		}
		// Another machine's registry names that machine's services.
		actx := RegistryAnswers(ctx, a.String())
		if SkipLocal(actx, pa.String()) {
			d.note(via, fmt.Errorf("%s is local to the registry's machine, not this one", pa))
			continue
		}
		if pc, pf, ok := d.try(actx, pa, via+" → "+pa.String()); ok {
			return pc, pf, true
		}
	}
	return nil, Found{}, false
}

// resolve asks a registry for the provider's endpoint: ipc.resolve by
// primal name or capability, then ipc.find_capability for the method and
// its domain (Songbird's "services" or capmesh's "providers").
func (d *discovery) resolve(ctx context.Context, c jsonrpc.Caller) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, d.q.ProbeTimeout)
	defer cancel()
	var params map[string]string
	if d.q.Primal != "" {
		params = map[string]string{"primal_id": d.q.Primal, "name": d.q.Primal}
	} else {
		params = map[string]string{"capability": d.q.Method}
	}
	var raw json.RawMessage
	err := c.Call(cctx, "ipc.resolve", params, &raw)
	if err == nil {
		if ep := EndpointOf(raw); ep != "" {
			return ep, nil
		}
	}
	if d.q.Primal != "" || refusedAsLocal(err) {
		// A registry that refused the provider as local to another machine
		// would list it all the same: asking again would connect to it.
		return "", fmt.Errorf("ipc.resolve: %v", errOr(err, "no endpoint in the answer"))
	}
	for _, capName := range []string{d.q.Method, d.domain} {
		var res struct {
			Providers []json.RawMessage `json:"providers"`
			Services  []json.RawMessage `json:"services"`
		}
		if err = c.Call(cctx, "ipc.find_capability", map[string]string{"capability": capName}, &res); err != nil {
			continue
		}
		for _, p := range append(res.Providers, res.Services...) {
			if ep := EndpointOf(p); ep != "" && Dialable(p) {
				return ep, nil
			}
		}
	}
	return "", fmt.Errorf("the registry knows no provider: %v", errOr(err, "none listed"))
}

// codeWordLocalEndpoint is the registry's refusal of an endpoint local
// to another machine (registry.CodeWordLocalEndpoint).
const codeWordLocalEndpoint = "endpoint_is_local"

// refusedAsLocal reports whether err is a registry's endpoint_is_local
// refusal.
func refusedAsLocal(err error) bool {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return false
	}
	var d struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(je.Data, &d) == nil && d.Code == codeWordLocalEndpoint
}

// Dialable reports whether a provider record of a registry's answer
// (ipc.list, ipc.discover, ipc.find_capability) may be dialled from the
// registry's machine: false when the registry marks it "dialable": false
// (local to another machine), true otherwise — also for a registry that
// does not send the field.
func Dialable(raw json.RawMessage) bool {
	var rec struct {
		Dialable *bool `json:"dialable"`
	}
	return json.Unmarshal(raw, &rec) != nil || rec.Dialable == nil || *rec.Dialable
}

func errOr(err error, s string) any {
	if err != nil {
		return err
	}
	return s
}

// EndpointOf reads the endpoint of a provider record in any form a
// registry sends: "endpoint" as a string or as a tagged object (Songbird's
// {"transport":"uds","path":…} and {"transport":"tcp","host":…,"port":…},
// {"type":"unix","path":…}, {"UnixSocket":{"path":…}}, {"unix":"/p"},
// {"type":"tcp","host":…,"port":…}, {"Tcp":{"host":…,"port":…}}), then
// "socket_path", "socket", "native_endpoint". It returns "" when there is
// none.
func EndpointOf(raw json.RawMessage) string {
	var rec map[string]json.RawMessage
	if json.Unmarshal(raw, &rec) != nil {
		return ""
	}
	for _, k := range []string{"endpoint", "socket_path", "socket", "native_endpoint"} {
		if v, ok := rec[k]; ok {
			if ep := endpointValue(v); ep != "" {
				return ep
			}
		}
	}
	return ""
}

func endpointValue(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		if strings.HasPrefix(s, "/primal/") { // a virtual endpoint, not an address
			return ""
		}
		return s
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil {
		return ""
	}
	var kind string
	for _, tag := range []string{"transport", "type"} {
		if t, ok := obj[tag]; ok {
			_ = json.Unmarshal(t, &kind)
			return tagged(strings.ToLower(kind), v)
		}
	}
	if len(obj) == 1 {
		for k, inner := range obj {
			var p string
			if json.Unmarshal(inner, &p) == nil {
				inner, _ = json.Marshal(map[string]string{"path": p, "address": p})
			}
			return tagged(strings.ToLower(k), inner)
		}
	}
	return ""
}

// tagged turns the body of a tagged endpoint into an address.
func tagged(kind string, body json.RawMessage) string {
	var b struct {
		Path    string `json:"path"`
		Host    string `json:"host"`
		Port    int    `json:"port"`
		Address string `json:"address"`
		URL     string `json:"url"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	switch kind {
	case "unix", "unixsocket", "unix_socket", "uds":
		if b.Path != "" {
			return "unix://" + b.Path
		}
	case "tcp", "tcpsocket", "tcp_socket":
		if b.Host != "" && b.Port > 0 {
			return "tcp://" + net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		}
		if b.Address != "" {
			return "tcp://" + b.Address
		}
	case "http", "https":
		return nonEmptyStr(b.URL, b.Address)
	}
	return ""
}

func (d *discovery) tcp(ctx context.Context) (jsonrpc.Caller, Found, bool) {
	var cands []Found
	for _, k := range d.envNames() {
		if v := os.Getenv(k + "_TCP"); v != "" {
			if a, err := Parse("tcp://" + strings.TrimPrefix(v, "tcp://")); err == nil {
				cands = append(cands, Found{a, viaTCP + k + "_TCP"})
			} else {
				d.note(viaTCP+k+"_TCP", err)
			}
		}
	}
	for _, k := range d.envNames() {
		if v := os.Getenv(k + "_PORT"); v != "" {
			if p, err := strconv.ParseUint(v, 10, 16); err == nil && p > 0 {
				cands = append(cands, Found{Address{Scheme: "tcp", Host: net.JoinHostPort("127.0.0.1", v)}, viaTCP + k + "_PORT"})
			} else {
				d.note(viaTCP+k+"_PORT", fmt.Errorf("%q is not a port", v))
			}
		}
	}
	for _, f := range cands {
		if c, got, ok := d.try(ctx, f.Addr, f.Via); ok {
			return c, got, true
		}
	}
	return nil, Found{}, false
}
