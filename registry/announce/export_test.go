package announce

// WithTimeScale returns cfg with the session's clock running k times
// faster, to match a registry whose clock is fast.
func WithTimeScale(cfg Config, k float64) Config {
	cfg.timeScale = k
	return cfg
}
