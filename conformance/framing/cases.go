package framing

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path"
	"sort"
	"strings"
	"time"

	"golang.org/x/tools/txtar"
)

// Case is one data-driven wire check: lines to send on a fresh connection
// and the replies expected, each a JSON pattern (see Match). Cases live as
// txtar files in testdata/cases, embedded in the binary, so that `capmesh
// audit` and our own tests run exactly the same bytes:
//
//	id: IPC.parse_error
//	requirement: a line that is not JSON gets -32700 and the connection still works
//	source: JSON-RPC 2.0 §5.1; Primal IPC v3.1 §Wire Framing
//	severity: must
//	-- send --
//	this is not json
//	{"jsonrpc":"2.0","method":"health.liveness","id":"audit-1"}
//	-- expect --
//	{"jsonrpc":"2.0","error":{"code":-32700},"id":null}
//	{"jsonrpc":"2.0","id":"audit-1"}
//
// Replies may arrive in any order (JSON-RPC 2.0 lets a server answer out of
// order); each must match a distinct expected pattern, and a reply that
// matches none fails the case.
type Case struct {
	// Name is the file name without .txtar.
	Name string
	// ID, Requirement and Source identify the check the case decides.
	ID, Requirement, Source string
	// Should marks a SHOULD: a failure is reported as Warn.
	Should bool
	// Send holds the lines sent, each followed by '\n', exactly as written.
	Send [][]byte
	// Expect holds the reply patterns.
	Expect []any
}

//go:embed testdata/cases/*.txtar
var caseFiles embed.FS

// Cases returns the embedded framing cases, sorted by name.
func Cases() ([]Case, error) {
	names, err := fs.Glob(caseFiles, "testdata/cases/*.txtar")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Case
	for _, n := range names {
		data, err := caseFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		c, err := ParseCase(strings.TrimSuffix(path.Base(n), ".txtar"), data)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ParseCase reads one case file.
func ParseCase(name string, data []byte) (Case, error) {
	ar := txtar.Parse(data)
	c := Case{Name: name}
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return c, fmt.Errorf("case %s: header line %q is not key: value", name, line)
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "id":
			c.ID = v
		case "requirement":
			c.Requirement = v
		case "source":
			c.Source = v
		case "severity":
			switch v {
			case "must":
			case "should":
				c.Should = true
			default:
				return c, fmt.Errorf("case %s: severity %q: want must or should", name, v)
			}
		default:
			return c, fmt.Errorf("case %s: unknown header %q", name, k)
		}
	}
	if c.ID == "" || c.Requirement == "" {
		return c, fmt.Errorf("case %s: id and requirement are required", name)
	}
	for _, f := range ar.Files {
		switch f.Name {
		case "send":
			c.Send = append(c.Send, bytes.Split(bytes.TrimRight(f.Data, "\n"), []byte("\n"))...)
		case "expect":
			for i, l := range bytes.Split(bytes.TrimSpace(f.Data), []byte("\n")) {
				p, err := decodeJSON(l)
				if err != nil {
					return c, fmt.Errorf("case %s: expect line %d: %w", name, i+1, err)
				}
				c.Expect = append(c.Expect, p)
			}
		default:
			return c, fmt.Errorf("case %s: unknown section %q", name, f.Name)
		}
	}
	if len(c.Send) == 0 || len(c.Expect) == 0 {
		return c, fmt.Errorf("case %s: needs a send and an expect section", name)
	}
	return c, nil
}

// decodeJSON decodes one JSON value keeping numbers as written.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// Match reports whether value matches pattern: an object pattern matches an
// object holding at least its members, each matching; an array pattern an
// array of the same length whose elements match in some order; a scalar
// only an equal scalar (numbers compared by value).
func Match(pattern, value any) bool {
	switch p := pattern.(type) {
	case map[string]any:
		v, ok := value.(map[string]any)
		if !ok {
			return false
		}
		for k, pv := range p {
			vv, ok := v[k]
			if !ok || !Match(pv, vv) {
				return false
			}
		}
		return true
	case []any:
		v, ok := value.([]any)
		if !ok || len(v) != len(p) {
			return false
		}
		used := make([]bool, len(v))
	next:
		for _, pe := range p {
			for i, ve := range v {
				if !used[i] && Match(pe, ve) {
					used[i] = true
					continue next
				}
			}
			return false
		}
		return true
	case json.Number:
		v, ok := value.(json.Number)
		if !ok {
			return false
		}
		if p == v {
			return true
		}
		pf, err1 := p.Float64()
		vf, err2 := v.Float64()
		return err1 == nil && err2 == nil && pf == vf
	default:
		return pattern == value
	}
}

// Run plays the case on conn and returns nil when every expected reply
// arrived, or an error naming what went wrong. It closes nothing; the
// caller owns conn. The deadline bounds the whole exchange.
func (c Case) Run(ctx context.Context, conn net.Conn, deadline time.Time) error {
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	var out bytes.Buffer
	for _, l := range c.Send {
		out.Write(l)
		out.WriteByte('\n')
	}
	if _, err := conn.Write(out.Bytes()); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	r := bufio.NewReader(conn)
	remaining := append([]any(nil), c.Expect...)
	for len(remaining) > 0 {
		line, err := r.ReadBytes('\n')
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				return fmt.Errorf("no reply within the probe timeout; still expected %s", compact(remaining))
			case errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0:
				return fmt.Errorf("reply %q was not terminated by a newline before the connection closed", abbrev(line))
			default:
				return fmt.Errorf("connection closed (%v); still expected %s", err, compact(remaining))
			}
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		v, err := decodeJSON(line)
		if err != nil {
			return fmt.Errorf("reply %q is not one JSON value: %v", abbrev(line), err)
		}
		matched := -1
		for i, p := range remaining {
			if Match(p, v) {
				matched = i
				break
			}
		}
		if matched < 0 {
			return fmt.Errorf("unexpected reply %s; expected %s", abbrev(line), compact(remaining))
		}
		remaining = append(remaining[:matched], remaining[matched+1:]...)
	}
	return nil
}

// compact renders the patterns still expected, joined by "and".
func compact(ps []any) string {
	var parts []string
	for _, p := range ps {
		b, _ := json.Marshal(p)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, " and ")
}

// abbrev shortens a reply for an error message: trimmed, at most 160 bytes.
func abbrev(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
