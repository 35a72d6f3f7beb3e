package mcpbridge

import (
	"testing"

	"github.com/capmesh/capmesh/wire"
)

func TestToOperation(t *testing.T) {
	for in, want := range map[string]string{
		"echo":                           "echo",
		"get-sum":                        "get_sum",
		"longRunningOperation":           "long_running_operation",
		"trigger-long-running-operation": "trigger_long_running_operation",
		"get_sum":                        "get_sum",
		"getURL":                         "get_url",
		"Echo":                           "echo",
		"2fa":                            "t_2fa",
		"--x--":                          "x",
		"":                               "tool",
		"ünïcode":                        "n_code",
		"a.b/c d":                        "a_b_c_d",
	} {
		if got := ToOperation(in); got != want {
			t.Errorf("ToOperation(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMethodsOneToOne(t *testing.T) {
	names := []string{"get-sum", "get_sum", "getSum", "echo", "echo"}
	m := Methods("everything", names)
	if len(m) != 4 {
		t.Fatalf("got %d entries, want 4: %v", len(m), m)
	}
	seen := map[string]string{}
	for n, meth := range m {
		if wire.ValidateMethodName(meth) != nil {
			t.Errorf("%q → %q is not a valid method", n, meth)
		}
		if o, dup := seen[meth]; dup {
			t.Errorf("%q and %q both map to %q", n, o, meth)
		}
		seen[meth] = n
	}
	// Byte order decides: "get-sum" < "getSum" < "get_sum".
	if m["get-sum"] != "everything.get_sum" || m["getSum"] != "everything.get_sum_2" || m["get_sum"] != "everything.get_sum_3" {
		t.Errorf("suffixes not in name order: %v", m)
	}
}

func TestToDomain(t *testing.T) {
	for in, want := range map[string]string{
		"mcp-servers/everything":     "everything",
		"example-servers/everything": "everything",
		"health":                     "health_mcp",
		"mcp":                        "mcp_mcp",
		"My Server":                  "my_server",
	} {
		if got := ToDomain(in); got != want {
			t.Errorf("ToDomain(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzToOperation(f *testing.F) {
	for _, s := range []string{"echo", "get-sum", "longRunningOperation", "2fa", "", "ä"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		op := ToOperation(name)
		if wire.ValidateMethodName("d."+op) != nil {
			t.Fatalf("ToOperation(%q) = %q is not a method segment", name, op)
		}
		if len(op) > maxOperation {
			t.Fatalf("ToOperation(%q) has %d bytes", name, len(op))
		}
	})
}
