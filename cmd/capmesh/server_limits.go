package main

import (
	"sort"
	"strings"

	"github.com/capmesh/capmesh/registry"
)

// rateLimits turns --http-rate-limit GROUP=N,… into the registry's
// per-client limits: N requests a minute per client IP (burst N), 0 for
// no limit; groups not named keep their default.
func rateLimits(m map[string]int) (registry.RateLimits, error) {
	var rl registry.RateLimits
	groups := map[string]*registry.RateLimit{"agents": &rl.Agents, "join": &rl.Join, "admin": &rl.Admin}
	for g, v := range m {
		p, ok := groups[g]
		if !ok {
			names := make([]string, 0, len(groups))
			for k := range groups {
				names = append(names, k)
			}
			sort.Strings(names)
			return rl, usageErrorf("--http-rate-limit %s: unknown group (want %s)", g, strings.Join(names, ", "))
		}
		switch {
		case v < 0:
			return rl, usageErrorf("--http-rate-limit %s=%d: want a count a minute, or 0 for no limit", g, v)
		case v == 0:
			p.PerMinute = -1
		default:
			p.PerMinute = v
		}
	}
	return rl, nil
}
