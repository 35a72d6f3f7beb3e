package chp

import (
	"encoding/json"
	"testing"
)

// TestDisabledReadsForeignMarks: Disabled recognises the marks other hosts
// write, and nothing else.
func TestDisabledReadsForeignMarks(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"id":"a","enabled":false}`:                           true, // TypeScript reference host
		`{"id":"a","status":"disabled"}`:                       true,
		`{"id":"a","status":"DISABLED"}`:                       true,
		`{"id":"a","metadata":{"` + EnabledKey + `":false}}`:   true,
		`{"id":"a","metadata":{"` + EnabledKey + `":"false"}}`: false,
		`{"id":"a","metadata":{"enabled":false}}`:              false,
		`{"id":"a","enabled":true,"status":"deprecated"}`:      false,
		`{"id":"a","metadata":[1]}`:                            false,
		`{"id":"a"}`:                                           false,
	} {
		var d CapabilityDescriptor
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			t.Fatal(err)
		}
		if d.Disabled() != want {
			t.Errorf("%s: Disabled() = %v, want %v", raw, !want, want)
		}
	}
}
