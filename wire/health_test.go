package wire

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadHealth covers the shapes real primals answer the health triad
// with.
func TestReadHealth(t *testing.T) {
	tests := []struct {
		name string
		kind HealthKind
		in   string
		want HealthReading
	}{
		{"standard liveness", KindLiveness, `{"status":"alive"}`, HealthReading{HealthUp, "alive", true}},
		{"alive flag (checklist, sweetGrass)", KindLiveness, `{"alive":true}`, HealthReading{HealthUp, "", true}},
		{"rhizoCrypt liveness", KindLiveness, `{"status":"alive","primal":"rhizocrypt","version":"0.14.17","uptime_s":42}`, HealthReading{HealthUp, "alive", true}},
		{"older Songbird liveness", KindLiveness, `{"status":"healthy"}`, HealthReading{HealthUp, "healthy", false}},
		{"empty object", KindLiveness, `{}`, HealthReading{HealthUnknown, "", false}},
		{"alive false", KindLiveness, `{"alive":false}`, HealthReading{HealthDown, "", false}},
		{"bare pong", KindLiveness, `"pong"`, HealthReading{HealthUp, "pong", false}},
		{"bare true", KindLiveness, `true`, HealthReading{HealthUp, "", false}},
		{"null", KindLiveness, `null`, HealthReading{}},
		{"array", KindLiveness, `[1]`, HealthReading{}},
		{"rhizoCrypt readiness", KindReadiness, `{"status":"ready","primal":"rhizocrypt","version":"0.14.17"}`, HealthReading{HealthUp, "ready", true}},
		{"rhizoCrypt not ready", KindReadiness, `{"status":"not_ready","primal":"rhizocrypt"}`, HealthReading{HealthDown, "not_ready", true}},
		{"NestGate readiness: the flag wins", KindReadiness, `{"ready":false,"status":"healthy","version":"0.5.0"}`, HealthReading{HealthDown, "healthy", true}},
		{"Songbird check", KindCheck, `{"status":"healthy","primal":"songbird","uptime_seconds":null,"subsystems":{"ipc":"up"}}`, HealthReading{HealthUp, "healthy", true}},
		{"degraded check", KindCheck, `{"status":"degraded"}`, HealthReading{HealthDegraded, "degraded", true}},
		{"rhizoCrypt check", KindCheck, `{"healthy":true,"state":"running","active_sessions":0,"total_vertices":0,"uptime_seconds":5}`, HealthReading{HealthUp, "", true}},
		{"rhizoCrypt unhealthy", KindCheck, `{"healthy":false,"state":"stopping"}`, HealthReading{HealthDown, "", true}},
		{"unknown status word", KindCheck, `{"status":"purple"}`, HealthReading{HealthUnknown, "purple", true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ReadHealth(tt.kind, json.RawMessage(tt.in))); diff != "" {
				t.Errorf("ReadHealth (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHealthEmitted: what a capmesh host emits reads back as up and
// conformant under both spellings the checklist allows.
func TestHealthEmitted(t *testing.T) {
	for _, tt := range []struct {
		kind HealthKind
		v    any
		want string
	}{
		{KindLiveness, NewLiveness("demo", "1.0.0", 7), `{"status":"alive","alive":true,"primal":"demo","version":"1.0.0","uptime_seconds":7}`},
		{KindReadiness, NewReadiness("demo", "1.0.0", true, nil), `{"status":"ready","ready":true,"primal":"demo","version":"1.0.0"}`},
		{KindReadiness, NewReadiness("demo", "1.0.0", false, map[string]string{"store": "down"}), `{"status":"not_ready","ready":false,"primal":"demo","version":"1.0.0","subsystems":{"store":"down"}}`},
		{KindCheck, HealthCheck{Status: StatusHealthy, Healthy: true, Primal: "demo", Version: "1.0.0", UptimeSeconds: 3}, `{"status":"healthy","healthy":true,"primal":"demo","version":"1.0.0","uptime_seconds":3}`},
	} {
		b, err := json.Marshal(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("%s marshals to\n %s\nwant\n %s", tt.kind.Method(), b, tt.want)
		}
		r := ReadHealth(tt.kind, b)
		wantState := HealthUp
		if rd, ok := tt.v.(Readiness); ok && !rd.Ready {
			wantState = HealthDown
		}
		if r.State != wantState || !r.Conformant {
			t.Errorf("%s reads back as %+v", tt.kind.Method(), r)
		}
	}
}

func FuzzReadHealth(f *testing.F) {
	f.Add(0, []byte(`{"status":"alive"}`))
	f.Add(1, []byte(`{"ready":true,"status":"not_ready"}`))
	f.Add(2, []byte(`{"healthy":"yes"}`))
	f.Fuzz(func(t *testing.T, kind int, in []byte) {
		r := ReadHealth(HealthKind(kind%3), in)
		if r.State < HealthUnknown || r.State > HealthDown {
			t.Fatalf("state %d", r.State)
		}
	})
}
