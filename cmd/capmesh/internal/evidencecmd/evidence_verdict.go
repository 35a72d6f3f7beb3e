package evidencecmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/capmesh/capmesh/chp"
)

// printVerdict writes the text form of a bundle verification: the verdict
// line, every check, each event's attribution state and the warnings.
func printVerdict(w io.Writer, v *chp.BundleVerification) {
	verdict := "VALID"
	if !v.Valid {
		verdict = "INVALID"
	}
	parts := []string{}
	if v.Assurance != "" {
		parts = append(parts, v.Assurance)
	}
	parts = append(parts, fmt.Sprintf("%d events", v.EventCount))
	if v.HostID != "" {
		parts = append(parts, "host "+v.HostID)
	}
	if v.KeyID != "" {
		parts = append(parts, "key "+v.KeyID)
	}
	fmt.Fprintf(w, "%s (%s)\n", verdict, strings.Join(parts, ", "))
	for _, c := range v.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		line := fmt.Sprintf("  %s %s", mark, c.Name)
		if c.Detail != "" {
			line += ": " + c.Detail
		}
		fmt.Fprintln(w, line)
	}
	if len(v.Attribution) > 0 {
		mismatched := len(v.Attribution) - v.Bound - v.Unbound
		fmt.Fprintf(w, "  attribution: %d bound, %d unbound, %d edited\n", v.Bound, v.Unbound, mismatched)
		for _, a := range v.Attribution {
			line := fmt.Sprintf("    event %d", a.Index)
			if a.Sequence != "" {
				line += " seq " + a.Sequence
			}
			if a.EventType != "" {
				line += " " + a.EventType
			}
			line += ": " + a.Attribution
			if a.Detail != "" {
				line += " (" + a.Detail + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
	for _, warn := range v.Warnings {
		fmt.Fprintln(w, "  WARNING: "+warn)
	}
}
