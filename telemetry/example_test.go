package telemetry_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
	"github.com/capmesh/capmesh/telemetry"
)

// A host program opts in to metrics: the observers go into its Config,
// the exposition onto its HTTP listener behind its access policy.
func Example() {
	m := telemetry.New(telemetry.Options{})
	cfg := &host.Config{NoSocket: true, HTTP: "127.0.0.1:0", Ephemeral: true, NoAnnounce: true, Logger: slog.New(slog.DiscardHandler)}
	cfg.RPC.Observer = m.RPC()
	cfg.CHP.Observer = m.CHP()
	h, err := host.New(host.Info{Name: "metered", Version: "1.0.0", Domain: "metered"}, cfg)
	if err != nil {
		panic(err)
	}
	if err := h.MountHTTPKeyed("/metrics", m.Handler()); err != nil {
		panic(err)
	}
	m.AddMethods(h.Names()...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	<-h.Ready()

	base := "http://" + h.Addr("http")
	if err := jhttp.NewClient(base+"/jsonrpc", nil).Call(ctx, "health.liveness", nil, nil); err != nil {
		panic(err)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `capmesh_rpc_requests_total{method="health.liveness"`) {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// capmesh_rpc_requests_total{method="health.liveness",outcome="ok"} 1
}
