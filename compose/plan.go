package compose

import (
	"fmt"
	"math"
	"strings"
)

// Cost is the cost of one method on one host, from cost_estimates.
type Cost struct {
	CPU       string  `json:"cpu,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	// Known is false when the host gives no estimate for the method or its
	// domain.
	Known bool `json:"known"`
}

var cpuRank = map[string]int{"": 0, "low": 1, "medium": 2, "high": 3}

// String renders the cost as "high, 50 ms" (or "unknown").
func (c Cost) String() string {
	if !c.Known {
		return "cost unknown"
	}
	cpu := c.CPU
	if cpu == "" {
		cpu = "cpu ?"
	}
	return fmt.Sprintf("%s, %g ms", cpu, c.LatencyMS)
}

// cost looks method up in the host's cost_estimates, then its domain (the
// standard allows per-domain hints).
func (h *Host) cost(method string) Cost {
	if e, ok := h.Costs[method]; ok {
		return Cost{CPU: e.CPU, LatencyMS: e.LatencyMS, Known: true}
	}
	if d, _, ok := strings.Cut(method, "."); ok {
		if e, ok := h.Costs[d]; ok {
			return Cost{CPU: e.CPU, LatencyMS: e.LatencyMS, Known: true}
		}
	}
	return Cost{}
}

// lessCost orders costs: known before unknown, then lower latency, then
// lower CPU class.
func lessCost(a, b Cost) bool {
	if a.Known != b.Known {
		return a.Known
	}
	if a.LatencyMS != b.LatencyMS {
		return a.LatencyMS < b.LatencyMS
	}
	return cpuRank[a.CPU] < cpuRank[b.CPU]
}

// PlanStep is one method of a plan and the host chosen to run it.
type PlanStep struct {
	Method   string `json:"method"`
	Provider string `json:"provider"`
	Cost     Cost   `json:"cost"`
	// After lists the prerequisites (operation_dependencies) of Method.
	After []string `json:"after,omitempty"`
	// Alternatives are the other usable providers that were not chosen.
	Alternatives []string `json:"alternatives,omitempty"`
}

// Plan is an execution plan for a goal method: its prerequisite chain in
// an order that satisfies operation_dependencies, each step on the
// cheapest provider, and the total.
type Plan struct {
	Goal  string     `json:"goal"`
	Steps []PlanStep `json:"steps"`
	// Total sums latency and takes the highest CPU class; Total.Known is
	// false when some step has no estimate (Unknown lists them).
	Total   Cost     `json:"total"`
	Unknown []string `json:"unknown_cost,omitempty"`
}

type subplan struct {
	steps []PlanStep
	total Cost
}

func total(steps []PlanStep) (Cost, []string) {
	t := Cost{Known: true}
	var unknown []string
	for _, s := range steps {
		if !s.Cost.Known {
			t.Known = false
			unknown = append(unknown, s.Method)
			continue
		}
		t.LatencyMS += s.Cost.LatencyMS
		if cpuRank[s.Cost.CPU] > cpuRank[t.CPU] {
			t.CPU = s.Cost.CPU
		}
	}
	// Sums of decimal fractions pick up binary noise (0.05 + 0.1 =
	// 0.15000000000000002); estimates are nowhere near that precise, so
	// round to a nanosecond.
	t.LatencyMS = math.Round(t.LatencyMS*1e6) / 1e6
	return t, unknown
}

// Plan computes the execution plan of goal. Where several live, trusted
// hosts provide a method, each is tried with its own prerequisites and the
// cheapest whole sub-plan wins (lower total latency, then CPU class, then
// name). It fails when a method of the chain has no usable provider or the
// chain loops.
func (c *Composition) Plan(goal string) (*Plan, error) {
	memo := map[string]*subplan{}
	var best func(method string, path []string) (*subplan, error)
	best = func(method string, path []string) (*subplan, error) {
		for i, p := range path {
			if p == method {
				return nil, fmt.Errorf("operation_dependencies loop: %s", strings.Join(append(path[i:], method), " → "))
			}
		}
		if sp, ok := memo[method]; ok {
			return sp, nil
		}
		usable, unusable := c.Providers(method)
		if len(usable) == 0 {
			if len(unusable) > 0 {
				return nil, fmt.Errorf("%s: provided only by hosts that are not live or not trusted (%s)", method, unusable[0].Name)
			}
			return nil, fmt.Errorf("%s: no host provides it", method)
		}
		var chosen *subplan
		var chosenBy string
		var lastErr error
		for _, h := range usable {
			var steps []PlanStep
			ok := true
			for _, d := range h.Deps[method] {
				sp, err := best(d, append(path, method))
				if err != nil {
					lastErr, ok = err, false
					break
				}
				steps = appendSteps(steps, sp.steps)
			}
			if !ok {
				continue
			}
			steps = appendSteps(steps, []PlanStep{{Method: method, Provider: h.Name, Cost: h.cost(method), After: h.Deps[method]}})
			t, _ := total(steps)
			if chosen == nil || lessCost(t, chosen.total) || (t == chosen.total && h.Name < chosenBy) {
				chosen, chosenBy = &subplan{steps: steps, total: t}, h.Name
			}
		}
		if chosen == nil {
			return nil, lastErr
		}
		// Record the providers passed over at this step.
		last := &chosen.steps[len(chosen.steps)-1]
		last.Alternatives = nil
		for _, h := range usable {
			if h.Name != chosenBy {
				last.Alternatives = append(last.Alternatives, h.Name)
			}
		}
		memo[method] = chosen
		return chosen, nil
	}
	sp, err := best(goal, nil)
	if err != nil {
		return nil, err
	}
	p := &Plan{Goal: goal, Steps: sp.steps}
	p.Total, p.Unknown = total(p.Steps)
	return p, nil
}

// appendSteps appends the steps of b not already in a (by method).
func appendSteps(a, b []PlanStep) []PlanStep {
	for _, s := range b {
		dup := false
		for _, x := range a {
			if x.Method == s.Method {
				dup = true
				break
			}
		}
		if !dup {
			a = append(a, s)
		}
	}
	return a
}
