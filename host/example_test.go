package host_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

// Example is a complete provider: it declares itself and one capability,
// serves on a Unix socket, and is asked what every client may ask — here
// through wire.Inspect, which is what `capmesh inspect` runs.
func Example() {
	dir, _ := os.MkdirTemp("", "hasher")
	defer os.RemoveAll(dir)

	h, err := host.New(host.Info{Name: "hasher", Version: "1.0.0", Domain: "hash", License: "MIT"},
		&host.Config{Socket: filepath.Join(dir, "hasher.sock"), Ephemeral: true, NoAnnounce: true, Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	type in struct {
		Data string `json:"data" jsonschema:"the text to hash"`
	}
	err = host.Register(h, "hash.sha256", func(_ context.Context, in in) (string, error) {
		sum := sha256.Sum256([]byte(in.Data))
		return hex.EncodeToString(sum[:]), nil
	}, host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 0.1}))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	<-h.Ready()

	c, err := jsonrpc.Dial(ctx, "unix", h.Addr("unix"), nil)
	if err != nil {
		panic(err)
	}
	var sum string
	_ = c.Call(ctx, "hash.sha256", map[string]string{"data": "abc"}, &sum)
	fmt.Println(sum)
	in2, _ := wire.Inspect(ctx, c, &wire.InspectOptions{Transport: "unix", ProbeMethods: true})
	fmt.Println("level", in2.Report.Verified, "signature verified:", in2.Announcement.Verified != nil)
	c.Close()

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
	// level 3 signature verified: true
	// stopped: <nil>
}
