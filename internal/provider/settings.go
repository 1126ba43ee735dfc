package provider

import (
	"fmt"
	"time"
)

// Settings are what a provider needs of one source: the settings of a
// config's sources.NAME that are about signatures and event identity.
// Keys in errors (*SettingsError) are the config's keys below the source.
type Settings struct {
	Provider string   // required: one of Names()
	Secrets  []string // required unless Signature.None; each non-empty
	// Tolerance bounds the clock skew of timestamped schemes, either way;
	// New reads 0 as DefaultTolerance.
	Tolerance time.Duration
	// PublicURL is the URL as the provider calls it; required for
	// URL-bound providers (Twilio, HubSpot, Square).
	PublicURL string
	Signature *Signature // generic only: required there, "none" or a scheme
	// ID, "header:NAME" or "json:PATH", overrides the provider's dedup key.
	ID string
	// Type, "header:NAME" or "json:PATH", overrides the provider's event
	// type (generic sources have one only with it).
	Type string
	// Ordering overrides the provider's ordering hints; nil keeps them.
	Ordering *Ordering
}

// Signature is a generic source's HMAC scheme; None accepts unsigned
// requests.
type Signature struct {
	None      bool
	Header    string // required
	Algorithm string // sha1 | sha256 | sha512; "" is sha256
	Encoding  string // hex | base64; "" is hex
	Prefix    string // before the encoded MAC, e.g. "sha256="
}

// Ordering names where a source's events carry the object they are about
// and its version ("header:NAME" or "json:PATH"). A provider that orders
// its events itself may leave both empty; otherwise both are required.
type Ordering struct {
	Object, Version string
}

// SettingsError is a problem with Settings. Key is the setting, relative to the
// source ("secrets[1]", "signature.algorithm"), so a caller can say where
// it is in its own terms; config adds the file, the full key and the line.
// Msg never quotes a secret.
type SettingsError struct {
	Key string
	Msg string
}

func (e *SettingsError) Error() string { return e.Key + ": " + e.Msg }

func errorf(key, format string, args ...any) *SettingsError {
	return &SettingsError{Key: key, Msg: fmt.Sprintf(format, args...)}
}
