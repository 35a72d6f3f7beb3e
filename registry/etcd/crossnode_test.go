package etcd_test

import (
	"context"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
)

// TestOtherNodesLocalRegistrationIsNotTheirs: a local registration made
// through node a (machine 1) is indexed by every node as
// "local:<name>@<a's node>". Through node b (machine 2) and node c
// (another node of machine 1), a process of the node's user naming that
// key — from any process id, also the registrant's number — can neither
// unregister it nor renew it (agent_not_registered: it is not theirs),
// and nothing dials its socket; nor can anyone register a name holding
// '@' (invalid_params). Before, b dialled machine 1's socket path on
// machine 2 to see whether it was gone, a process of b's machine with
// the registrant's pid number removed it from b's index, and a heartbeat
// through b made a second, phantom "local:<name>" entry there.
func TestOtherNodesLocalRegistrationIsNotTheirs(t *testing.T) {
	srv := etcdtest.Start(t)
	a, ca := joinOn(t, srv, "/notheirs/", "machine-1")
	b, _ := joinOn(t, srv, "/notheirs/", "machine-2")
	c, _ := joinOn(t, srv, "/notheirs/", "machine-1")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	sock := listen(t, "unix", "")
	conns := countingHost(t, "beardog", sock)
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "beardog", Capabilities: []string{"crypto.sign"}, Endpoint: sock.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		return len(b.Find("crypto.sign", registry.FindOptions{})) == 1 && len(c.Find("crypto.sign", registry.FindOptions{})) == 1
	})
	before := conns.Load()
	other := localPeer()
	other.PID = 1
	for node, n := range map[string]*registry.Node{"b on machine 2": b, "c on machine 1": c} {
		seen := n.Find("crypto.sign", registry.FindOptions{})[0]
		name := strings.TrimPrefix(seen.Key, "local:")
		if !strings.Contains(name, "@") {
			t.Fatalf("%s keys a's registration %q, want <name>@<node>", node, seen.Key)
		}
		for who, p := range map[string]jsonrpc.Peer{"another pid": other, "the registrant's pid number": localPeer()} {
			if _, err := n.Heartbeat(ctx, p, name, ""); errWord(err) != registry.CodeWordNotRegistered {
				t.Errorf("%s: Heartbeat(%q) by %s: %v, want %s", node, name, who, err, registry.CodeWordNotRegistered)
			}
			if err := n.Unregister(ctx, p, name, ""); errWord(err) != registry.CodeWordNotRegistered {
				t.Errorf("%s: Unregister(%q) by %s: %v, want %s", node, name, who, err, registry.CodeWordNotRegistered)
			}
		}
		_, _, err := n.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: name, Capabilities: []string{"crypto.sign"}, Endpoint: sock.Addr().String()})
		if errWord(err) != registry.CodeWordInvalidParams {
			t.Errorf("%s: RegisterLocal(%q): %v, want %s", node, name, err, registry.CodeWordInvalidParams)
		}
		if got := n.Find("crypto.sign", registry.FindOptions{}); len(got) != 1 || got[0].Key != seen.Key || !got[0].ExpiresAt.Equal(seen.ExpiresAt) {
			t.Errorf("%s now finds %+v, want a's registration only, unchanged", node, got)
		}
	}
	// One connection more: a's routed call, made after all of the above.
	var res string
	if err := ca.Call(ctx, "crypto.sign", map[string]any{}, &res); err != nil || res != "ok" {
		t.Fatalf("through a: %q, %v", res, err)
	}
	if d := conns.Load() - before; d != 1 {
		t.Errorf("the registrant's socket saw %d connection(s), want 1 (a's call)", d)
	}
	if got := a.Find("crypto.sign", registry.FindOptions{}); len(got) != 1 || got[0].Key != "local:beardog" {
		t.Errorf("a finds %+v, want its registration", got)
	}
}
