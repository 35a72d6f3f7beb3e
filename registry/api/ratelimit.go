package api

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/capmesh/capmesh/registry"
)

// limiter is one group's buckets.
type limiter struct {
	rate, burst float64 // tokens per second, bucket size
	max         int
	now         func() time.Time
	refused     func() // Observer.OnRateLimited of the limiter's group, or nil

	mu       sync.Mutex
	clients  map[string]*bucket
	overflow bucket
	swept    time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

// newLimiter returns nil (no limit) for a negative PerMinute.
func newLimiter(rl registry.RateLimit, maxClients int, now func() time.Time) *limiter {
	if rl.PerMinute < 0 {
		return nil
	}
	if rl.PerMinute == 0 {
		rl.PerMinute = registry.DefaultRatePerMinute
	}
	if rl.Burst <= 0 {
		rl.Burst = rl.PerMinute
	}
	if maxClients <= 0 {
		maxClients = 10000
	}
	l := &limiter{rate: float64(rl.PerMinute) / 60, burst: float64(rl.Burst), max: maxClients, now: now, clients: map[string]*bucket{}}
	l.overflow = bucket{tokens: l.burst, at: now()}
	return l
}

// allow takes a token from client's bucket; when there is none it says
// how long until there is.
func (l *limiter) allow(client string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.clients[client]
	if b == nil {
		if len(l.clients) >= l.max {
			l.forgetFull(now)
		}
		if len(l.clients) >= l.max {
			b = &l.overflow
		} else {
			b = &bucket{tokens: l.burst, at: now}
			l.clients[client] = b
		}
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

func (l *limiter) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(l.burst, b.tokens+d.Seconds()*l.rate)
	}
	b.at = now
}

// forgetFull drops the clients whose bucket has refilled (they are as if
// new), at most once a second so that a full table costs one scan.
func (l *limiter) forgetFull(now time.Time) {
	if now.Sub(l.swept) < time.Second {
		return
	}
	l.swept = now
	for k, b := range l.clients {
		if l.refill(b, now); b.tokens >= l.burst {
			delete(l.clients, k)
		}
	}
}

// clientKey is the remote IP of r (the /64 of an IPv6 address).
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// limited wraps h with l: a client over its limit is answered 429
// rate_limit_exceeded with Retry-After (whole seconds).
func limited(l *limiter, h http.HandlerFunc) http.HandlerFunc {
	if l == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		ok, wait := l.allow(clientKey(r))
		if !ok {
			if l.refused != nil {
				l.refused()
			}
			secs := int(math.Ceil(wait.Seconds()))
			if secs < 1 {
				secs = 1
			}
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			e := registry.RefuseWithStatus(registry.CodeWordRateLimited, http.StatusTooManyRequests, registry.CodeUnavailable, "too many requests from this client; retry in %d s", secs)
			e.Details = map[string]any{"retry_after_seconds": secs}
			writeErr(w, r, e)
			return
		}
		h(w, r)
	}
}

// httpLimiters are the node's per-group limiters.
type httpLimiters struct{ agents, join, admin *limiter }

func newHTTPLimiters(rl registry.RateLimits, now func() time.Time) httpLimiters {
	return httpLimiters{
		agents: newLimiter(rl.Agents, rl.MaxClients, now),
		join:   newLimiter(rl.Join, rl.MaxClients, now),
		admin:  newLimiter(rl.Admin, rl.MaxClients, now),
	}
}

// observe makes the limiters report their refusals to obs.
func (h httpLimiters) observe(obs registry.Observer) {
	for group, l := range map[string]*limiter{"agents": h.agents, "join": h.join, "admin": h.admin} {
		if l != nil {
			l.refused = func() { obs.OnRateLimited(group) }
		}
	}
}
