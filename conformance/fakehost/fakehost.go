// Package fakehost serves recorded and deliberately broken capability hosts
// for the audit's tests: a host is described by a txtar Spec (recorded
// JSON-RPC answers per method, a behaviour, an optional CHP boundary) and
// served over a real listener with the plain jsonrpc server, so the audit
// meets it exactly as it would a real primal.
//
// A spec file:
//
//	# nestgate as rebuilt from its static tables: no top-level methods.
//	from: ecoprimals/real-responses/nestgate.capabilities.list.json
//	want-level: 1
//	want-fail: L2.methods L3.consumed
//	-- identity.get --
//	{"error":{"code":-32601,"message":"Method not found"}}
//
// Header keys: socket (the file name to listen on), from (a recorded capabilities.list response, relative to the
// shared spec directory; "from identity.get: …" records another method),
// behaviour (silent-drop, btsp-reject, hang), chp
// (fixtures, replay-reversed), and the expectations want-level,
// want-verified, want-fail (check ids), want-chp (ok, none, or the ids that
// must fail). Each section is named after a method and holds the response
// object to send ({"result": …} or {"error": …}); "*" is the answer for
// every advertised method without a section (default {"result": {}}).
// Health triad and identity.get default to conformant answers.
package fakehost

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/tools/txtar"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chprpc"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

// ErrNoSpecData means a spec names a recorded file that is not available.
var ErrNoSpecData = errors.New("fakehost: recorded spec data not available")

// Spec is one fake host.
type Spec struct {
	Name string
	// Answers maps a method to the response object sent for it.
	Answers map[string]json.RawMessage
	// Socket is the socket file name to serve on (default <Name>.sock).
	Socket string
	// Behaviour is "", "silent-drop", "btsp-reject" or "hang".
	Behaviour string
	// CHP is "", "fixtures" or "replay-reversed".
	CHP string
	// Want is what the audit must find.
	Want Want
}

// Want are a spec's expectations of the audit.
type Want struct {
	Level, Verified int
	// Fail lists check ids that must fail (and no others).
	Fail []string
	// CHP is "none" (no CHP), "ok", or the CHP check ids that must fail.
	CHP string
}

// ParseSpec reads a spec; specDir resolves "from:" (the shared spec data).
func ParseSpec(name string, data []byte, specDir string) (*Spec, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return parseJSONSpec(name, t)
	}
	ar := txtar.Parse(data)
	s := &Spec{Name: name, Answers: map[string]json.RawMessage{}}
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%s: header %q is not key: value", name, line)
		}
		v = strings.TrimSpace(v)
		var err error
		k = strings.TrimSpace(k)
		if method, ok := strings.CutPrefix(k, "from"); ok && (method == "" || method[0] == ' ') {
			method = strings.TrimSpace(method)
			if method == "" {
				method = wire.MethodCapabilitiesList
			}
			b, rerr := os.ReadFile(filepath.Join(specDir, v))
			if rerr != nil {
				return nil, fmt.Errorf("%s: %w: %v", name, ErrNoSpecData, rerr)
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, b); err != nil {
				return nil, fmt.Errorf("%s: %s: %v", name, v, err)
			}
			s.Answers[method] = buf.Bytes()
			continue
		}
		switch k {
		case "socket":
			s.Socket = v
		case "behaviour":
			s.Behaviour = v
		case "chp":
			s.CHP = v
		case "want-level":
			s.Want.Level, err = strconv.Atoi(v)
		case "want-verified":
			s.Want.Verified, err = strconv.Atoi(v)
		case "want-fail":
			s.Want.Fail = strings.Fields(v)
		case "want-chp":
			s.Want.CHP = v
		default:
			err = fmt.Errorf("unknown header %q", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	for _, f := range ar.Files {
		// Compact: a result is written as is, and newline framing
		// needs it on one line.
		var buf bytes.Buffer
		if err := json.Compact(&buf, f.Data); err != nil {
			return nil, fmt.Errorf("%s: section %s is not JSON: %v", name, f.Name, err)
		}
		s.Answers[f.Name] = buf.Bytes()
	}
	if _, ok := s.Answers[wire.MethodCapabilitiesList]; !ok && s.Behaviour == "" {
		return nil, fmt.Errorf("%s: no capabilities.list answer", name)
	}
	return s, nil
}

// parseJSONSpec reads the JSON form of a spec, for places where a txtar
// cannot nest (a testscript archive):
//
//	{"socket": "good.sock", "chp": "fixtures", "behaviour": "",
//	 "answers": {"capabilities.list": {"result": {…}}, "braid.vanish": {"error": {…}}}}
func parseJSONSpec(name string, data []byte) (*Spec, error) {
	var js struct {
		Socket    string                     `json:"socket"`
		Behaviour string                     `json:"behaviour"`
		CHP       string                     `json:"chp"`
		Answers   map[string]json.RawMessage `json:"answers"`
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&js); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	s := &Spec{Name: name, Socket: js.Socket, Behaviour: js.Behaviour, CHP: js.CHP, Answers: map[string]json.RawMessage{}}
	for m, a := range js.Answers {
		var buf bytes.Buffer
		if err := json.Compact(&buf, a); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", name, m, err)
		}
		s.Answers[m] = buf.Bytes()
	}
	if _, ok := s.Answers[wire.MethodCapabilitiesList]; !ok && s.Behaviour == "" {
		return nil, fmt.Errorf("%s: no capabilities.list answer", name)
	}
	return s, nil
}

// answer is a decoded response object.
type answer struct {
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

func (a answer) handler() jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		if a.Error != nil {
			return nil, a.Error
		}
		if a.Result == nil {
			return json.RawMessage("null"), nil
		}
		return a.Result, nil
	})
}

// Host is a running fake host's dispatcher.
type Host struct {
	spec     *Spec
	methods  map[string]jsonrpc.Handler
	boundary *boundary.Boundary
}

// New builds the dispatcher of s.
func New(s *Spec) (*Host, error) {
	h := &Host{spec: s, methods: map[string]jsonrpc.Handler{}}
	dec := func(m string) (answer, error) {
		var a answer
		if err := json.Unmarshal(s.Answers[m], &a); err != nil {
			return a, fmt.Errorf("%s: %s: %v", s.Name, m, err)
		}
		return a, nil
	}
	var advertised []string
	if raw, ok := s.Answers[wire.MethodCapabilitiesList]; ok {
		a, err := dec(wire.MethodCapabilitiesList)
		if err != nil {
			return nil, err
		}
		if a.Result != nil {
			if c, err := wire.Parse(a.Result); err == nil {
				advertised = append(append(advertised, c.Methods...), c.Envelope.MethodNames...)
				// identity.get defaults to the envelope's primal and version.
				if _, ok := s.Answers[wire.MethodIdentityGet]; !ok && c.Primal != "" {
					b, _ := json.Marshal(map[string]any{"result": map[string]string{"primal": c.Primal, "version": c.Version}})
					s.Answers[wire.MethodIdentityGet] = b
				}
			}
		}
		_ = raw
	}
	defaults := map[string]string{
		wire.MethodHealthLiveness:  `{"result":{"status":"alive","alive":true}}`,
		wire.MethodHealthReadiness: `{"result":{"status":"ready","ready":true}}`,
		wire.MethodHealthCheck:     `{"result":{"status":"healthy","healthy":true}}`,
	}
	for m, d := range defaults {
		if _, ok := s.Answers[m]; !ok {
			s.Answers[m] = json.RawMessage(d)
		}
	}
	star := answer{Result: json.RawMessage(`{}`)}
	if _, ok := s.Answers["*"]; ok {
		a, err := dec("*")
		if err != nil {
			return nil, err
		}
		star = a
	}
	if s.CHP != "" {
		b, err := boundary.New(boundary.Config{HostID: s.Name, HostVersion: "fakehost", Store: evidence.NewMemory(),
			Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()})
		if err != nil {
			return nil, err
		}
		if err := boundary.RegisterFixtures(b); err != nil {
			return nil, err
		}
		h.boundary = b
		for m, hd := range chprpc.Handlers(b) {
			h.methods[m] = hd
		}
		for _, c := range b.Capabilities() {
			h.methods[c.ID] = chprpc.DirectHandler(b)
		}
		if s.CHP == "replay-reversed" {
			h.methods["chp.replay"] = reversedReplay(b)
		}
	}
	for _, m := range advertised {
		if _, ok := h.methods[m]; !ok {
			h.methods[m] = star.handler()
		}
	}
	for m := range s.Answers {
		if m == "*" {
			continue
		}
		a, err := dec(m)
		if err != nil {
			return nil, err
		}
		h.methods[m] = a.handler()
	}
	return h, nil
}

// reversedReplay is chp.replay with the events in reverse sequence order:
// the broken host of the CHP.8 test.
func reversedReplay(b *boundary.Boundary) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		var q chp.ReplayQuery
		if err := req.UnmarshalParams(&q); err != nil {
			return nil, err
		}
		res, err := b.Replay(ctx, q)
		if err != nil {
			return nil, err
		}
		slices.Reverse(res.Events)
		return res, nil
	})
}

// Assign implements jsonrpc.Assigner.
func (h *Host) Assign(_ context.Context, method string) jsonrpc.Handler { return h.methods[method] }

// Names implements jsonrpc.Lister.
func (h *Host) Names() []string {
	var out []string
	for m := range h.methods {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Serve serves s on l until ctx ends, with its behaviour.
func Serve(ctx context.Context, l net.Listener, s *Spec) error {
	switch s.Behaviour {
	case "silent-drop":
		return acceptLoop(ctx, l, func(c net.Conn) {
			_, _ = bufio.NewReader(c).ReadBytes('\n')
			c.Close()
		})
	case "hang":
		return acceptLoop(ctx, l, func(c net.Conn) {
			<-ctx.Done()
			c.Close()
		})
	}
	h, err := New(s)
	if err != nil {
		l.Close()
		return err
	}
	opts := &jsonrpc.ServerOptions{}
	if s.Behaviour == "btsp-reject" {
		opts.ConnGate = func(context.Context, jsonrpc.Peer, []byte) *jsonrpc.Error {
			return jsonrpc.Errorf(jsonrpc.InvalidRequest, "BTSP handshake required").WithData(map[string]string{
				"reason": "This socket is family-scoped and requires a BTSP handshake before JSON-RPC traffic.", "btsp_version": "2.0"})
		}
	} else if s.Behaviour != "" {
		l.Close()
		return fmt.Errorf("%s: unknown behaviour %q", s.Name, s.Behaviour)
	}
	return jsonrpc.NewServer(h, opts).Serve(ctx, l)
}

func acceptLoop(ctx context.Context, l net.Listener, handle func(net.Conn)) error {
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(c)
		}()
	}
}
