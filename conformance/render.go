package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// levelMark renders whether a host reaches a level: ✓ verified, ~ reached
// with some requirements unobserved, ✗ failed.
func levelMark(h *HostReport, n int) string {
	switch {
	case !h.Reachable:
		return "✗"
	case h.Verified >= n:
		return "✓"
	case h.Level >= n:
		return "~"
	}
	return "✗"
}

func (h *HostReport) name() string {
	if h.Socket != nil {
		return filepath.Base(h.Socket.Path)
	}
	return h.Endpoint
}

func (h *HostReport) chpCell() string {
	switch {
	case h.CHP == nil:
		return "-"
	case h.CHP.NoCapabilities:
		return "- none"
	case h.CHP.OK():
		return fmt.Sprintf("✓ %d/9", h.CHP.Passed)
	}
	return fmt.Sprintf("✗ %d/9", h.CHP.Passed)
}

func (h *HostReport) ipcCell() string {
	pass, total := 0, 0
	for _, c := range h.Suite(SuiteIPC) {
		if c.Status == Skip {
			continue
		}
		total++
		if c.Status == Pass {
			pass++
		}
	}
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", pass, total)
}

// Gap is the first failure in a few words, and how many more there are.
func (h *HostReport) Gap() string {
	if !h.Reachable {
		return h.Error
	}
	failed := h.Failed()
	if len(failed) == 0 {
		if w := h.Warnings(); len(w) > 0 {
			return fmt.Sprintf("no failure; %d warning(s), first: %s %s", len(w), w[0].ID, w[0].Reason)
		}
		return "—"
	}
	s := failed[0].ID + ": " + failed[0].Reason
	if len(s) > 110 {
		s = s[:110] + "…"
	}
	if len(failed) > 1 {
		s += fmt.Sprintf(" (+%d more)", len(failed)-1)
	}
	return s
}

// WriteMatrix writes the compliance matrix: one row per host, like the
// table of the Capability Wire Standard but measured.
func WriteMatrix(w io.Writer, m *MachineReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tPRIMAL\tVERSION\tL1\tL2\tL3\tCHP\tSIGNATURE\tIPC\tGAP")
	for _, h := range m.Hosts {
		sig := h.Announcement
		if !h.Reachable {
			sig = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.name(), orDash(h.Primal), orDash(h.Version),
			levelMark(h, 1), levelMark(h, 2), levelMark(h, 3), h.chpCell(), sig, h.ipcCell(), h.Gap())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d host(s)", len(m.Hosts))
	if m.Dir != "" {
		fmt.Fprintf(w, " in %s", m.Dir)
	}
	fmt.Fprintf(w, ", audited in %s. ✓ verified  ~ reached, some requirements unobserved  ✗ failed\n", m.Duration.Round(1e6))
	for _, d := range m.Dead {
		fmt.Fprintf(w, "dead socket (stale, nobody listens): %s\n", d)
	}
	for _, d := range m.Dangling {
		fmt.Fprintf(w, "dangling symlink: %s\n", d)
	}
	return nil
}

// WriteReport writes one host's audit: a header, then every check by suite.
func WriteReport(w io.Writer, h *HostReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("Endpoint", h.Endpoint)
	if !h.Reachable {
		row("Reachable", "no: "+h.Error)
		return tw.Flush()
	}
	row("Primal", orDash(strings.TrimSpace(h.Primal+" "+h.Version)))
	lv := fmt.Sprintf("%d", h.Level)
	if h.Verified != h.Level {
		lv += fmt.Sprintf(" (verified %d; the rest unobserved)", h.Verified)
	}
	row("Wire level", lv)
	row("Announcement", h.Announcement)
	switch {
	case h.CHP == nil:
		row("CHP", "does not speak CHP")
	case h.CHP.NoCapabilities:
		row("CHP", "serves the binding over "+h.CHP.Binding+" but declares no capabilities (not a CHP capability host)")
	default:
		s := fmt.Sprintf("%d/9 requirements passed, %d failed, over %s", h.CHP.Passed, h.CHP.Failed, h.CHP.Binding)
		if h.CHP.HostID != "" {
			s += " (host " + h.CHP.HostID + ")"
		}
		row("CHP", s)
	}
	if s := h.Socket; s != nil {
		links := ""
		if len(s.Links) > 0 {
			links = ", linked as " + strings.Join(s.Links, ", ")
		}
		row("Socket", fmt.Sprintf("%s (mode %s, dir %s%s)", s.Resolved, s.Mode, s.DirMode, links))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	titles := map[string]string{
		SuiteWire:   "Capability Wire Standard v1.0",
		SuiteIPC:    "Primal IPC Protocol v3.1",
		SuiteCHP:    "Capability Host Protocol v0.1 §11",
		SuiteRFC005: "RFC-005 Capability Manifests",
	}
	for _, suite := range []string{SuiteWire, SuiteIPC, SuiteCHP, SuiteRFC005} {
		checks := h.Suite(suite)
		if len(checks) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", titles[suite])
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, c := range checks {
			line := c.Requirement
			if c.Reason != "" {
				line += ": " + c.Reason
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Status.Mark(), c.ID, line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// JUnit XML, the subset CI systems read.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Name    string       `xml:"name,attr"`
	Tests   int          `xml:"tests,attr"`
	Fail    int          `xml:"failures,attr"`
	Skipped int          `xml:"skipped,attr"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name    string      `xml:"name,attr"`
	Tests   int         `xml:"tests,attr"`
	Fail    int         `xml:"failures,attr"`
	Skipped int         `xml:"skipped,attr"`
	Time    string      `xml:"time,attr"`
	Cases   []junitCase `xml:"testcase"`
}

type junitCase struct {
	Class   string        `xml:"classname,attr"`
	Name    string        `xml:"name,attr"`
	Failure *junitMessage `xml:"failure,omitempty"`
	Skipped *junitMessage `xml:"skipped,omitempty"`
	Out     string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the reports as JUnit XML: one testsuite per host, one
// testcase per check. Failures are failures; unknown and not-applicable
// checks are skipped; warnings pass with their reason as output.
func WriteJUnit(w io.Writer, m *MachineReport) error {
	out := junitSuites{Name: "capmesh audit"}
	for _, h := range m.Hosts {
		s := junitSuite{Name: h.name(), Time: fmt.Sprintf("%.3f", h.Duration.Seconds())}
		if h.Primal != "" {
			s.Name += " (" + h.Primal + ")"
		}
		if !h.Reachable {
			s.Cases = append(s.Cases, junitCase{Class: "reachability", Name: "connect",
				Failure: &junitMessage{Message: h.Error, Body: h.Error}})
		}
		for _, c := range h.Checks {
			jc := junitCase{Class: c.Suite, Name: c.ID + " " + c.Requirement}
			switch c.Status {
			case Fail:
				jc.Failure = &junitMessage{Message: c.Reason, Body: c.Source}
			case Skip, Unknown:
				jc.Skipped = &junitMessage{Message: string(c.Status) + ": " + c.Reason}
			case Warn:
				jc.Out = "warning: " + c.Reason
			}
			s.Cases = append(s.Cases, jc)
		}
		for _, c := range s.Cases {
			s.Tests++
			if c.Failure != nil {
				s.Fail++
			}
			if c.Skipped != nil {
				s.Skipped++
			}
		}
		out.Tests += s.Tests
		out.Fail += s.Fail
		out.Skipped += s.Skipped
		out.Suites = append(out.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
