package telemetry_test

import (
	"testing"
	"time"

	"github.com/capmesh/capmesh/telemetry"
)

// BenchmarkRPCObserver is what a metered request adds to a call: the
// in-flight gauge up and down, the request counter and the latency
// histogram of a registered method.
func BenchmarkRPCObserver(b *testing.B) {
	m := telemetry.New(telemetry.Options{Methods: []string{"health.liveness"}, NoRuntime: true})
	o := m.RPC()
	b.ReportAllocs()
	for b.Loop() {
		o.OnInFlight(1)
		o.OnRequest("health.liveness", 0, time.Microsecond)
		o.OnInFlight(-1)
	}
}
