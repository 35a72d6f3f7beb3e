package mcpbridge

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/capmesh/capmesh/jsonrpc"
)

// TestNodeCapabilitiesSkipsWhatThisMachineMayNotDial: a provider the
// node marks "dialable": false, and one whose endpoint is a name that
// resolves to this machine's loopback (nothing says it was registered
// here), are never dialled; a provider at a literal address is.
func TestNodeCapabilitiesSkipsWhatThisMachineMayNotDial(t *testing.T) {
	ctx := testCtx(t)
	trusted := map[string]any{"trusted": true}
	services := []map[string]any{
		{"primal_id": "elsewhere", "endpoint": "unix:///run/elsewhere.sock", "trust": trusted, "dialable": false},
		{"primal_id": "literal", "endpoint": "tcp://127.0.0.1:9", "trust": trusted},
	}
	want := map[string]bool{"tcp://127.0.0.1:9": true}
	if h, err := os.Hostname(); err == nil {
		for _, n := range []string{h, "vm", "runsc"} {
			if addrs, err := net.LookupHost(n); err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
				services = append(services, map[string]any{"primal_id": "named", "endpoint": "tcp://" + n + ":9", "trust": trusted})
				break
			}
		}
	}
	node := fakeNode(t, services)
	up := NewUpstream("unix", node)
	defer up.Close()
	var mu sync.Mutex
	dialled := map[string]bool{}
	dial := func(_ context.Context, ep string) (jsonrpc.Caller, error) {
		mu.Lock()
		defer mu.Unlock()
		dialled[ep] = true
		return nil, errors.New("not dialled in this test")
	}
	if _, err := NodeCapabilities(ctx, up, dial, quietLogger()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) != len(want) || !dialled["tcp://127.0.0.1:9"] {
		t.Errorf("dialled %v, want only %v", dialled, want)
	}
}
