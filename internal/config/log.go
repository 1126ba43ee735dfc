package config

import (
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

// LogSettings configure the tamper-evident log (SPEC §8, docs/ledger.md).
type LogSettings struct {
	// KeyFile holds the Ed25519 checkpoint signing key; created (mode 0600)
	// on first start. Relative to the config file. Default anyhook-log.key.
	KeyFile string `yaml:"key_file"`
	// CheckpointInterval is how often a checkpoint is signed when the log
	// grew. Default 10s.
	CheckpointInterval Duration `yaml:"checkpoint_interval"`
	// PushURL, when set, receives every new signed checkpoint as a POST
	// (a witness or a bucket). Default none.
	PushURL string `yaml:"push_url"`
	// Retention empties the bodies of events older than this, keeping their
	// hashes (the log still verifies), their headers and dedup keys. 0s
	// keeps bodies forever. Default 720h (30 days).
	Retention Duration `yaml:"retention"`
	// Origin is the first line of every checkpoint, naming the log. Default:
	// the signing key's name, made unique when the key is generated.
	Origin string `yaml:"origin"`
}

// Log defaults.
const (
	DefaultLogKeyFile         = "anyhook-log.key"
	DefaultCheckpointInterval = 10 * time.Second
	DefaultRetention          = 720 * time.Hour
	// MinRetention is the shortest retention accepted (other than 0s): a
	// body must outlive any provider's retries and a person's replay.
	MinRetention = 24 * time.Hour
)

func (c *Config) setLogDefaults() {
	if c.Log.KeyFile == "" && !c.has("log.key_file") {
		c.Log.KeyFile = DefaultLogKeyFile
	}
	if c.Log.CheckpointInterval == 0 && !c.has("log.checkpoint_interval") {
		c.Log.CheckpointInterval = Duration(DefaultCheckpointInterval)
	}
	if c.Log.Retention == 0 && !c.has("log.retention") {
		c.Log.Retention = Duration(DefaultRetention)
	}
}

func (c *Config) validateLog() error {
	l := &c.Log
	if l.KeyFile == "" {
		return c.Errorf("log.key_file", "must name a file (default %s)", DefaultLogKeyFile)
	}
	if l.CheckpointInterval <= 0 {
		return c.Errorf("log.checkpoint_interval", "must be greater than 0")
	}
	if l.PushURL != "" {
		if err := checkHTTPURL(l.PushURL); err != nil {
			return c.Errorf("log.push_url", "%s", err)
		}
	}
	if l.Retention < 0 || (l.Retention > 0 && l.Retention.D() < MinRetention) {
		return c.Errorf("log.retention", "must be 0s (keep bodies) or at least %s, not %s", MinRetention, l.Retention)
	}
	if l.Origin != "" && (strings.ContainsFunc(l.Origin, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) || strings.Contains(l.Origin, "+")) {
		return c.Errorf("log.origin", "must be one word without spaces or '+', such as example.com/anyhook")
	}
	return nil
}

// LogKeyPath is log.key_file resolved against the config file's directory.
func (c *Config) LogKeyPath() string {
	if filepath.IsAbs(c.Log.KeyFile) {
		return c.Log.KeyFile
	}
	return filepath.Join(c.Dir, c.Log.KeyFile)
}
