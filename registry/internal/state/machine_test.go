package state

import "testing"

// TestLocalElsewhere: only a local-only endpoint is tied to a machine;
// one stamped with another machine is never dialled here; one without a
// recorded machine is this machine's on a node's own store and another
// machine's on a shared store (an older node's record).
func TestLocalElsewhere(t *testing.T) {
	for _, tc := range []struct {
		ep, machine string
		shared      bool
		want        bool
	}{
		{ep: "unix:///run/x.sock", machine: "m1", shared: true, want: false},
		{ep: "unix:///run/x.sock", machine: "m2", shared: true, want: true},
		{ep: "tcp://127.0.0.1:9000", machine: "m2", shared: false, want: true},
		{ep: "http://localhost:8080/jsonrpc", machine: "m2", shared: true, want: true},
		{ep: "tcp://127.0.0.1:9000", machine: "", shared: true, want: true},
		{ep: "tcp://127.0.0.1:9000", machine: "", shared: false, want: false},
		{ep: "tcp://192.0.2.7:9000", machine: "m2", shared: true, want: false},
		{ep: "tcp://192.0.2.7:9000", machine: "", shared: true, want: false},
	} {
		if got := LocalElsewhere(Entry{Endpoint: tc.ep, Machine: tc.machine}, "m1", tc.shared); got != tc.want {
			t.Errorf("LocalElsewhere(%s on %q, shared %v) = %v, want %v", tc.ep, tc.machine, tc.shared, got, tc.want)
		}
	}
}

// TestStamp: the admitting machine is kept for a local-only endpoint
// only.
func TestStamp(t *testing.T) {
	local := &Registration{Entry: Entry{Endpoint: "tcp://[::1]:7000"}}
	if got := Stamp(local, "m1"); got != "m1" || local.Machine != "m1" {
		t.Errorf("loopback: stamped %q (entry %q), want m1", got, local.Machine)
	}
	routable := &Registration{Entry: Entry{Endpoint: "tcp://198.51.100.4:7000"}}
	if got := Stamp(routable, "m1"); got != "" || routable.Machine != "" {
		t.Errorf("routable: stamped %q (entry %q), want none", got, routable.Machine)
	}
}

// TestStampLocalRegistration: a local registration is stamped with the
// admitting machine whatever its endpoint names (a host name that
// resolves to loopback is still this machine's service).
func TestStampLocalRegistration(t *testing.T) {
	r := &Registration{Entry: Entry{Endpoint: "tcp://vm:7000", Source: SourceLocal}}
	if got := Stamp(r, "m1"); got != "m1" || r.Machine != "m1" {
		t.Errorf("local registration: stamped %q (entry %q), want m1", got, r.Machine)
	}
}

// TestMayReachHere: only a registration admitted on this machine may be
// dialled to this machine itself.
func TestMayReachHere(t *testing.T) {
	for _, tc := range []struct {
		ep, source, machine string
		shared              bool
		want                bool
	}{
		{"tcp://vm:9000", SourceLocal, "m1", true, true},
		{"tcp://vm:9000", SourceLocal, "m2", true, false},
		{"tcp://vm:9000", SourceLocal, "", false, true},
		{"tcp://vm:9000", SourceLocal, "", true, false},
		{"tcp://vm:9000", SourceDescriptor, "", false, false},
		{"tcp://127.0.0.1:9000", SourceDescriptor, "", false, true},
		{"tcp://127.0.0.1:9000", SourceDescriptor, "", true, false},
		{"tcp://127.0.0.1:9000", SourceDescriptor, "m1", true, true},
		{"tcp://192.0.2.7:9000", SourceDescriptor, "", false, false},
	} {
		e := Entry{Endpoint: tc.ep, Source: tc.source, Machine: tc.machine}
		if got := MayReachHere(e, "m1", tc.shared); got != tc.want {
			t.Errorf("MayReachHere(%s %s on %q, shared %v) = %v, want %v", tc.source, tc.ep, tc.machine, tc.shared, got, tc.want)
		}
	}
}
