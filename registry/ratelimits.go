package registry

// RateLimit is a per-client token bucket: PerMinute requests a minute on
// average, up to Burst at once. PerMinute 0 means the group's default, a
// negative PerMinute turns the limit off; Burst 0 means PerMinute.
type RateLimit struct {
	PerMinute int
	Burst     int
}

// RateLimits are the per-client limits of the HTTP surface's writes, as
// the Genesis-Mesh reference NA has them (it answers 429 after 30 POSTs a
// minute from one IP). A client is its remote IP address (an IPv6 client
// its /64); X-Forwarded-For is not trusted. Reads are not limited.
type RateLimits struct {
	// Agents limits POST /agents and DELETE /agents/{key}. Default 30 a
	// minute.
	Agents RateLimit
	// Join limits the node requests POST /join, /renew and /heartbeat.
	// Default 30 a minute.
	Join RateLimit
	// Admin limits POST /admin/*. Default 30 a minute.
	Admin RateLimit
	// MaxClients bounds the clients remembered per group; once that many
	// are tracked and none can be forgotten (a bucket is forgotten when it
	// is full again), new clients share one bucket. Default 10000.
	MaxClients int
}

// DefaultRatePerMinute is every group's default limit.
const DefaultRatePerMinute = 30

// CodeWordRateLimited is the 429 refusal's word (the reference's).
const CodeWordRateLimited = "rate_limit_exceeded"
