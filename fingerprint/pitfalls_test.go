package fingerprint

import (
	"errors"
	"fmt"
	"testing"

	"github.com/capmesh/capmesh/canonical"
	"github.com/google/go-cmp/cmp"
)

func parse(t testing.TB, s string) canonical.Value {
	t.Helper()
	v, err := canonical.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func payloadString(t *testing.T, v canonical.Value, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	b, err := canonical.Khoralabs.AppendCanonical(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sp(s string) *string { return &s }

// One row per item of HASHING.md §7 (and the payload rules of §3).
func TestPitfallPayloads(t *testing.T) {
	schema := StandardSchema("test", 1)
	tests := []struct {
		name string
		got  func() (canonical.Value, error)
		want string
	}{
		{"tool instructions sorted by collation, duplicates and empty kept", func() (canonical.Value, error) {
			return (&Tool{Name: "t", InputSchema: schema, Instructions: []string{"b", "B", "", "a", "b"}}).StaticPayload()
		}, `{"description":null,"instructions":["","a","b","b","B"],"kind":"tool","name":"t","policies":[],"schema":{"vendor":"test","version":1}}`},
		{"empty description stays empty in the static hash", func() (canonical.Value, error) {
			return (&Tool{Name: "t", Description: sp(""), InputSchema: schema}).StaticPayload()
		}, `{"description":"","instructions":[],"kind":"tool","name":"t","policies":[],"schema":{"vendor":"test","version":1}}`},
		{"policyBindings only with policies, sorted by id, live default", func() (canonical.Value, error) {
			return (&Tool{Name: "t", InputSchema: schema, Policies: []Policy{{ID: "b", ExecuteBinding: sp("hint")}, {ID: "a"}, {ID: "_x"}}}).StaticPayload()
		}, `{"description":null,"instructions":[],"kind":"tool","name":"t","policies":["_x","a","b"],"policyBindings":[{"executeBinding":"live","id":"_x"},{"executeBinding":"live","id":"a"},{"executeBinding":"hint","id":"b"}],"schema":{"vendor":"test","version":1}}`},
		{"evaluated spec: no policyBindings, instructions split on blank lines", func() (canonical.Value, error) {
			return (&Tool{Name: "t", InputSchema: schema, Instructions: []string{"b\n\na", ""}, Policies: []Policy{{ID: "p"}}}).Evaluate().Payload()
		}, `{"description":null,"instructions":["","a","b"],"kind":"tool","name":"t","policies":["p"],"schema":{"vendor":"test","version":1}}`},
		{"wire path: empty description becomes null", func() (canonical.Value, error) {
			return (&Tool{Name: "t", Description: sp(""), InputSchema: schema}).Evaluate().Wire().Payload()
		}, `{"description":null,"instructions":[],"kind":"tool","name":"t","policies":[],"schema":{"vendor":"test","version":1}}`},
		{"toJSONSchema result hashed and re-sorted", func() (canonical.Value, error) {
			return (&Tool{Name: "t", InputSchema: JSONSchema(parse(t, `{"type":"object","required":["n"],"properties":{"n":{"type":"number"}}}`))}).StaticPayload()
		}, `{"description":null,"instructions":[],"kind":"tool","name":"t","policies":[],"schema":{"properties":{"n":{"type":"number"}},"required":["n"],"type":"object"}}`},
		{"toJSONSchema undefined drops the schema key", func() (canonical.Value, error) {
			return (&Tool{Name: "t", InputSchema: JSONSchema(Undefined)}).StaticPayload()
		}, `{"description":null,"instructions":[],"kind":"tool","name":"t","policies":[]}`},
		{"undefined vendor drops the key", func() (canonical.Value, error) {
			v := parse(t, `1`)
			return (&Tool{Name: "t", InputSchema: Schema{Version: &v}}).StaticPayload()
		}, `{"description":null,"instructions":[],"kind":"tool","name":"t","policies":[],"schema":{"version":1}}`},
		{"toolkit instructions as given, null when absent; members by collation", func() (canonical.Value, error) {
			return (&Toolkit{Name: "k", Instructions: []string{"z", " a "}, Members: []Composable{&Tool{Name: "b", InputSchema: schema}, &Tool{Name: "A", InputSchema: schema}}}).StaticPayload()
		}, ""},
		{"dynamic toolkit: policies sorted, no bindings, no members", func() (canonical.Value, error) {
			return (&DynamicToolkit{Name: "d", Policies: []Policy{{ID: "z"}, {ID: "a", ExecuteBinding: sp("x")}}}).StaticPayload()
		}, `{"instructions":null,"kind":"dynamicToolkit","name":"d","policies":["a","z"]}`},
		{"agent instructions JS-trimmed, empties dropped, order kept", func() (canonical.Value, error) {
			return (&RegisteredAgent{AgentID: "a", Root: &DynamicToolkit{Name: "d"}, Instructions: []string{"\ufeff z \u3000", "\u0085", "  ", "a"}}).StaticPayload()
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := tt.got()
			got := payloadString(t, v, err)
			if tt.want == "" {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestToolkitMembersAndAgentTrim(t *testing.T) {
	schema := StandardSchema("test", 1)
	b, A := &Tool{Name: "b", InputSchema: schema}, &Tool{Name: "A", InputSchema: schema}
	hb, _ := b.StaticHash()
	hA, _ := A.StaticHash()
	k := &Toolkit{Name: "k", Instructions: []string{"z", " a "}, Members: []Composable{b, A}}
	v, err := k.StaticPayload()
	got := payloadString(t, v, err)
	want := fmt.Sprintf(`{"instructions":["z"," a "],"kind":"toolkit","members":[{"hash":"%s","name":"A"},{"hash":"%s","name":"b"}],"name":"k"}`, hA, hb)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	d := &DynamicToolkit{Name: "d"}
	hd, _ := d.StaticHash()
	a := &RegisteredAgent{AgentID: "a", Root: d, Instructions: []string{"\ufeff z \u3000", "\u0085", "  ", "a"}}
	v, err = a.StaticPayload()
	got = payloadString(t, v, err)
	want = fmt.Sprintf("{\"agentInstructions\":[\"z\",\"\u0085\",\"a\"],\"rootComposableHash\":\"%s\"}", hd)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRuntimeQuirks(t *testing.T) {
	schema := StandardSchema("test", 1)
	spec := (&Tool{Name: "dyn", InputSchema: schema, Policies: []Policy{{ID: "p"}}}).Evaluate()
	specHash, _ := spec.Hash()
	static, _ := (&Tool{Name: "dyn", InputSchema: schema, Policies: []Policy{{ID: "p"}}}).StaticHash()
	if specHash == static {
		t.Fatal("evaluated and static hashes of a tool with policies must differ")
	}
	r := &Runtime{
		EnabledToolNames: []string{"z", "dyn", "a", "missing", "a", "empty"},
		NameToStaticHash: map[string]string{"a": "h_a", "z": "h_z", "empty": ""},
		ToolsFallback:    map[string]*ToolSpec{"dyn": spec, "empty": spec},
	}
	refs, err := r.ToolRefs()
	if err != nil {
		t.Fatal(err)
	}
	want := []ToolRef{{"a", "h_a"}, {"a", "h_a"}, {"dyn", specHash}, {"empty", specHash}, {"z", "h_z"}}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}
	// An empty-string augment still counts; a function augment drops runtimeBinding.
	r.Augments = map[string]canonical.Value{"a": parse(t, `""`), "z": parse(t, `{"$function":"f"}`)}
	refs, _ = r.ToolRefs()
	bindA, _ := ToolBindingHash("h_a", parse(t, `""`))
	if refs[0].ToolHash != bindA {
		t.Errorf("empty augment not applied: %v", refs[0])
	}
	p, _ := ToolBindingPayload("h_z", parse(t, `{"$function":"f"}`))
	if got := payloadString(t, p, nil); got != `{"baseToolHash":"h_z","kind":"runtime_tool_binding"}` {
		t.Errorf("function binding payload = %s", got)
	}
	// Object.prototype names: inherited augment (function) vs. throwing fallback.
	r = &Runtime{EnabledToolNames: []string{"toString"}, NameToStaticHash: map[string]string{"toString": "h"}, Augments: map[string]canonical.Value{}}
	refs, err = r.ToolRefs()
	wantH, _ := ToolBindingHash("h", parse(t, `{"$function":"toString"}`))
	if err != nil || len(refs) != 1 || refs[0].ToolHash != wantH {
		t.Errorf("toString augment quirk: %v %v", refs, err)
	}
	r = &Runtime{EnabledToolNames: []string{"constructor"}}
	if _, err := r.ToolRefs(); err == nil {
		t.Error("fallback lookup of constructor should fail like the reference")
	}
}

func TestInvocationContextRules(t *testing.T) {
	tests := []struct {
		in, allow, want, err string
	}{
		{in: `{"b":[1,{"$undefined":true},2],"a":{"$date":"2024-01-02T03:04:05.678+01:00"},"u":{"$undefined":true}}`, want: `{"context":{"a":"2024-01-02T02:04:05.678Z","b":[1,2]},"kind":"invocation"}`},
		{in: `{"10":1,"2":2,"x":{"__proto__":{"p":1},"y":{}}}`, want: `{"context":{"2":2,"10":1,"x":{"y":{}}},"kind":"invocation"}`},
		{in: `{"n":{"$number":"-0"},"m":{"$number":"NaN"}}`, want: `{"context":{"m":null,"n":0},"kind":"invocation"}`},
		{in: `{"a":{"b":[{"$bigint":"1"}]}}`, err: "invocationContext not JSON-serializable at a.b[0] (bigint) — use strings or numbers"},
		{in: `{"a":{"b":{"$ancestor":1}}}`, err: "invocationContext is circular at a.b.a"},
		{in: `{"a":{"b":{"$ancestor":0}}}`, err: "invocationContext is circular at a.b"},
		{in: `{"d":{"$date":"Invalid Date"}}`, err: "invocationContext at d: invalid date: toISOString throws RangeError"},
		{in: `{"a":1}`, allow: "b"},
		{in: `{"a":{"$undefined":true}}`},
		{in: `{"$date":"2024-01-01T00:00:00Z"}`},
		{in: `[1]`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var allow []string
			if tt.allow != "" {
				allow = []string{tt.allow}
			}
			ctx, ok, err := NormalizeInvocationContext(parse(t, tt.in), allow)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if ok {
					t.Fatalf("got context %v, want none", ctx)
				}
				return
			}
			if got := payloadString(t, InvocationPayload(ctx), nil); got != tt.want {
				t.Errorf("got %s\nwant %s", got, tt.want)
			}
		})
	}
	_, _, err := NormalizeInvocationContext(parse(t, `{"f":{"$function":"f"}}`), nil)
	if !errors.Is(err, ErrNotSerializable) {
		t.Errorf("errors.Is(ErrNotSerializable) = false for %v", err)
	}
}

func TestPlainObjectJSValues(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a":{"$undefined":true},"b":[{"$undefined":true},{"$function":"f"}],"c":{"$function":"f"}}`, `{"b":[null,null]}`},
		{`{"d":{"$date":"2024-01-01T00:00:00Z"}}`, `{"d":{}}`},
		{`[{"$number":"-0"},{"$number":"Infinity"},{"$number":"NaN"}]`, `[0,null,null]`},
		{`{"$literal":{"$undefined":true}}`, `{"$undefined":true}`},
	}
	for _, tt := range tests {
		got, _, err := Canonical(parse(t, tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	if h, err := HashPlainObject(parse(t, `{"$function":"f"}`)); err != nil || h != EmptyHash {
		t.Errorf("function hash = %s, %v", h, err)
	}
	if _, err := HashPlainObject(parse(t, `{"a":{"$bigint":"1"}}`)); !errors.Is(err, ErrNotSerializable) {
		t.Errorf("BigInt: %v", err)
	}
	if _, err := HashPlainObject(parse(t, `{"a":{"$ancestor":0}}`)); !errors.Is(err, ErrCircular) {
		t.Errorf("cycle: %v", err)
	}
}

func TestFormatHashShort(t *testing.T) {
	for in, want := range map[string]string{"": "", "abc": "abc", "0123456789abc": "0123456789abc", "0123456789abcd": "012345…89abcd"} {
		if got := FormatHashShort(in); got != want {
			t.Errorf("FormatHashShort(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzFingerprint: hashing any JSON document (markers included) never
// panics, the canonical string re-parses, and tool declarations decode or
// fail cleanly.
func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{
		`{"kind":"tool","name":"t","inputSchema":{"~standard":{"vendor":"test","version":1}}}`,
		`{"kind":"toolkit","name":"k","members":[{"kind":"dynamicToolkit","name":"d","policies":["p"]}]}`,
		`{"a":{"$undefined":true},"b":[{"$date":"x"}],"c":{"$ancestor":0}}`,
		`{"x":{"$number":"-0"},"10":1,"2":[{"$literal":{"$bigint":"1"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := canonical.Parse(data)
		if err != nil {
			return
		}
		if out, ok, err := Canonical(v); err == nil && ok {
			if _, err := canonical.Parse(out); err != nil {
				t.Fatalf("canonical %q does not parse: %v", out, err)
			}
		}
		_, _ = HashPlainObject(v)
		_, _, _ = InvocationHash(v, nil)
		if c, err := DecodeComposable(v); err == nil {
			_, _ = c.StaticHash()
		}
		if r, err := DecodeRuntime(v); err == nil {
			_, _ = r.Hash()
		}
		if l, err := DecodeLinkInput(v); err == nil {
			_, _ = CreateCapabilityLink(*l)
		}
	})
}
