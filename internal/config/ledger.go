package config

import (
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

// LedgerSettings configure the tamper-evident ledger (SPEC §8, docs/ledger.md).
type LedgerSettings struct {
	// KeyFile holds the Ed25519 checkpoint signing key; created (mode 0600)
	// on first start. Relative to the config file. Default anyhook-log.key.
	KeyFile string `yaml:"key_file"`
	// CheckpointInterval is how often a checkpoint is signed when the ledger
	// grew. Default 10s.
	CheckpointInterval Duration `yaml:"checkpoint_interval"`
	// PushURL, when set, receives every new signed checkpoint as a POST
	// (a witness or a bucket). Default none.
	PushURL string `yaml:"push_url"`
	// Retention empties the bodies of events older than this, keeping their
	// hashes (the ledger still verifies), their headers and dedup keys. 0s
	// keeps bodies forever. Default 720h (30 days).
	Retention Duration `yaml:"retention"`
	// Origin is the first line of every checkpoint, naming the ledger. Default:
	// the signing key's name, made unique when the key is generated.
	Origin string `yaml:"origin"`
}

// Log defaults.
const (
	DefaultLedgerKeyFile      = "anyhook-log.key"
	DefaultCheckpointInterval = 10 * time.Second
	DefaultRetention          = 720 * time.Hour
	// MinRetention is the shortest retention accepted (other than 0s): a
	// body must outlive any provider's retries and a person's replay.
	MinRetention = 24 * time.Hour
)

func (c *Config) setLedgerDefaults() {
	if c.Ledger.KeyFile == "" && !c.has("log.key_file") {
		c.Ledger.KeyFile = DefaultLedgerKeyFile
	}
	if c.Ledger.CheckpointInterval == 0 && !c.has("log.checkpoint_interval") {
		c.Ledger.CheckpointInterval = Duration(DefaultCheckpointInterval)
	}
	if c.Ledger.Retention == 0 && !c.has("log.retention") {
		c.Ledger.Retention = Duration(DefaultRetention)
	}
}

func (c *Config) validateLedger() error {
	l := &c.Ledger
	if l.KeyFile == "" {
		return c.Errorf("log.key_file", "must name a file (default %s)", DefaultLedgerKeyFile)
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

// LedgerKeyPath is log.key_file resolved against the config file's directory.
func (c *Config) LedgerKeyPath() string {
	if filepath.IsAbs(c.Ledger.KeyFile) {
		return c.Ledger.KeyFile
	}
	return filepath.Join(c.Dir, c.Ledger.KeyFile)
}
