package wire_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/internal/specdata"
	"github.com/capmesh/capmesh/wire"
)

// TestUnreadNamesReported pins issue 17's NestGate finding: its answer
// lists 99 names in capabilities, but the standard parse order reads
// provided_capabilities first, whose methods are fewer; the names a client
// following that order cannot call are reported as a Deviation instead of
// vanishing.
func TestUnreadNamesReported(t *testing.T) {
	data, err := os.ReadFile(specdata.Path("ecoprimals/real-responses/nestgate.capabilities.list.json"))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(data, &resp) != nil || len(resp.Result) == 0 {
		resp.Result = data
	}
	c, err := wire.Parse(resp.Result)
	if err != nil {
		t.Fatal(err)
	}
	var found string
	for _, d := range c.Deviations {
		if d.Field == "capabilities" && strings.HasPrefix(d.Detail, "names 38 method(s) that provided_capabilities, the source read, lacks") {
			found = d.Detail
		}
	}
	if c.Source != wire.SourceProvidedCapabilities || found == "" {
		t.Fatalf("source %q, deviations %v: want the unread capabilities names reported", c.Source, c.Deviations)
	}
	t.Log(found)
}
