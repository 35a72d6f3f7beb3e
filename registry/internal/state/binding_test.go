package state

import (
	"strings"
	"testing"
)

// TestAdmittedHere: a local registration may be renewed, removed or
// taken over through a node only when that node admitted it on its
// machine: keyed by its own name (not another node's "<name>@<node>"),
// stamped with this machine (or unstamped on a node's own store).
func TestAdmittedHere(t *testing.T) {
	for _, tc := range []struct {
		key, name, machine string
		source             string
		shared             bool
		want               bool
	}{
		{key: "local:beardog", name: "beardog", machine: "m1", shared: true, want: true},
		{key: "local:beardog", name: "BearDog", machine: "m1", shared: true, want: true},
		{key: "local:beardog@n2", name: "beardog", machine: "m1", shared: true, want: false},
		{key: "local:beardog@n2", name: "beardog", machine: "m2", shared: true, want: false},
		{key: "local:beardog", name: "beardog", machine: "m2", shared: true, want: false},
		{key: "local:beardog", name: "beardog", machine: "m2", shared: false, want: false},
		{key: "local:beardog", name: "beardog", machine: "", shared: false, want: true},
		{key: "local:beardog", name: "beardog", machine: "", shared: true, want: false},
		{key: "local:x@old", name: "x@old", machine: "", shared: false, want: true}, // an older own-store name
		{key: "agent-1", name: "agent-1", machine: "m1", source: SourceDescriptor, shared: true, want: false},
	} {
		src := tc.source
		if src == "" {
			src = SourceLocal
		}
		e := Entry{Key: tc.key, Name: tc.name, Machine: tc.machine, Source: src, Endpoint: "unix:///run/b.sock"}
		if got := AdmittedHere(e, "m1", tc.shared); got != tc.want {
			t.Errorf("AdmittedHere(%s %q on %q, shared %v) = %v, want %v", src, tc.key, tc.machine, tc.shared, got, tc.want)
		}
	}
}

// TestCheckLocalName: a local registration's name is required and may
// not hold '@', the separator of another node's key.
func TestCheckLocalName(t *testing.T) {
	for name, want := range map[string]string{"beardog": "", "": "required", "beardog@n2": "'@'", "@": "'@'"} {
		err := CheckLocalName(name)
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("CheckLocalName(%q) = %v, want %q", name, err, want)
		}
	}
}

// TestOwnedBy: the token decides when one is presented; else the
// process id, known only with peer credentials.
func TestOwnedBy(t *testing.T) {
	lr := &LocalRecord{PID: 42, TokenHash: TokenHash("tok")}
	for _, tc := range []struct {
		hasCred bool
		pid     int32
		token   string
		want    bool
	}{
		{true, 42, "", true},
		{false, 42, "", false},
		{true, 7, "", false},
		{true, 7, "tok", true},
		{true, 42, "wrong", false},
	} {
		if got := lr.OwnedBy(tc.hasCred, tc.pid, tc.token); got != tc.want {
			t.Errorf("OwnedBy(%v, %d, %q) = %v, want %v", tc.hasCred, tc.pid, tc.token, got, tc.want)
		}
	}
	if (&LocalRecord{}).OwnedBy(true, 0, "") {
		t.Error("a record without a pid is owned by pid 0")
	}
}
