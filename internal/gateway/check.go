package gateway

import (
	"github.com/anyhook/anyhook/internal/alert"
	"github.com/anyhook/anyhook/internal/config"
)

// Check runs the checks New makes of a loaded configuration beyond
// config.Validate, without opening the store or listening: it builds every
// source's provider (so a Stripe secret that does not start with whsec_
// fails here as it does at start), checks every destination's signing
// secret and builds the alert sinks. `anyhook config check` uses it. The
// error is a *ConfigError.
func Check(cfg *config.Config) error {
	if _, err := buildSources(cfg); err != nil {
		return &ConfigError{err}
	}
	if _, err := buildDestinations(cfg); err != nil {
		return &ConfigError{err}
	}
	if _, err := alert.New(cfg.Alerts, alert.Options{}); err != nil {
		return &ConfigError{err}
	}
	return nil
}
