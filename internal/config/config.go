// Package config loads and validates the gateway's YAML configuration
// (SPEC §3). Every error names the file, the key and, where known, the line.
package config

import (
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/alert"
)

// Config is the whole file. Field comments give the defaults.
type Config struct {
	Path string `yaml:"-"` // the file it was loaded from
	Dir  string `yaml:"-"` // its directory; relative paths resolve against it

	Listen   string `yaml:"listen"`   // default 127.0.0.1:8080
	TLS      *TLS   `yaml:"tls"`      // listen's HTTPS; default none: plain HTTP (see listen.go)
	Database string `yaml:"database"` // default sqlite:anyhook.db
	// AdminToken is the token named "admin" with scope admin. An admin
	// token (this or one in Tokens) is required unless the admin API
	// listens on a loopback address.
	AdminToken string `yaml:"admin_token"`
	// Tokens are named tokens with scopes, for the admin API, the
	// dashboard, /metrics and the pull API (docs/configuration.md,
	// "tokens"). Default none.
	Tokens []Token `yaml:"tokens"`
	// DashboardURL is the gateway's own URL as people open it (behind a
	// proxy, say): alerts link to the event's page under it. Optional;
	// without it, alerts carry no link.
	DashboardURL string `yaml:"dashboard_url"`
	// Admin moves the admin API, dashboard, /metrics and /readyz to a
	// listener of their own; default none: listen serves everything.
	Admin *AdminSettings `yaml:"admin"`

	// Names in insertion order are kept in SourceOrder/DestinationOrder.
	Sources      map[string]*Source      `yaml:"sources"`
	Destinations map[string]*Destination `yaml:"destinations"`
	Alerts       []Alert                 `yaml:"alerts"`
	// AlertWindow is the alerts' rate limit: per (kind, destination), the
	// first is sent at once and the rest of the window's are folded into
	// one summary. Default 1m.
	AlertWindow Duration `yaml:"alert_window"`
	// AlertDeliveryDead sends a delivery_dead alert for each delivery
	// that went dead (folded by alert_window). Default false: incidents
	// alert instead, once per way a destination fails.
	AlertDeliveryDead bool `yaml:"alert_delivery_dead"`
	// Incidents say when incidents resolve, reopen and escalate.
	Incidents IncidentSettings `yaml:"incidents"`

	Delivery DeliverySettings `yaml:"delivery"`
	Ingest   IngestSettings   `yaml:"ingest"`
	Ledger   LedgerSettings   `yaml:"log"` // the tamper-evident ledger; see ledger.go

	SourceOrder      []string `yaml:"-"`
	DestinationOrder []string `yaml:"-"`

	// Skipped are the values LoadFor left empty because the command does
	// not use them and they could not be expanded (an unset ${VAR}), each
	// with its file, line, key and why.
	Skipped []*Error `yaml:"-"`

	// warnings are what decoding found legal but likely a mistake, and
	// notes what Validate did (see Warnings).
	warnings, notes []*Error
	// mistakes are the problems decoding reported (see Follows).
	mistakes []*Error

	// lines maps a dotted key path ("sources.stripe.secrets",
	// "alerts[0].slack") to the line it appears on, for Errorf.
	lines map[string]int
}

// IncidentSettings are the incidents' windows (docs/configuration.md,
// "incidents").
type IncidentSettings struct {
	// ResolveAfter: an incident resolves by itself once its destination
	// has delivered, with no failure since, for this long. Default 5m.
	ResolveAfter Duration `yaml:"resolve_after"`
	// ReopenWithin: a failure like a resolved incident's within this long
	// of its resolve reopens it. 0s: never reopen. Default 30m.
	ReopenWithin Duration `yaml:"reopen_within"`
	// EscalateEvents: an open incident escalates (one more alert) once
	// this many distinct events are affected. 0: never. Default 10.
	EscalateEvents int `yaml:"escalate_events"`
	// EscalateAfter: ... or once it has been open this long. 0s: never.
	// Default 15m.
	EscalateAfter Duration `yaml:"escalate_after"`
	// Retention: a resolved incident (and its sample of events) is
	// deleted this long after its resolve. 0s: kept for ever. Default
	// 2160h (90 days).
	Retention Duration `yaml:"retention"`
}

// Source is one inbound URL: POST /webhooks/<Name>.
type Source struct {
	Name      string   `yaml:"-"`
	Provider  string   `yaml:"provider"`  // required
	Secrets   []string `yaml:"secrets"`   // required unless signature: none
	Tolerance Duration `yaml:"tolerance"` // default 5m; timestamped schemes only
	MaxBody   Size     `yaml:"max_body"`  // default 10MiB
	// PublicURL is the URL as the provider calls it, for URL-bound schemes
	// (Twilio, HubSpot v3, Square).
	PublicURL string `yaml:"public_url"`

	Signature *Signature `yaml:"signature"` // generic only; "none" or a scheme
	ID        string     `yaml:"id"`        // generic: header:NAME or json:PATH
	// Type says where the event type is (header:NAME or json:PATH); it
	// overrides the provider's own. Generic sources have a type only
	// with it.
	Type      string     `yaml:"type"`
	Ordering  *Ordering  `yaml:"ordering"`
	RateLimit *RateLimit `yaml:"rate_limit"` // default none: no limit

	// APIKey is the key of the provider's API that a backfill reads (or,
	// for GitHub, asks for redeliveries) with (docs/backfill.md); ${VAR}
	// like any value. Never logged, stored with events or shown.
	APIKey string `yaml:"api_key"`
	// APIBase overrides the provider's API root (tests, self-hosted
	// GitHub Enterprise); default the provider's own.
	APIBase string `yaml:"api_base"`
	// Backfill says what a backfill reads where the API key alone does not
	// (GitHub: which hook's deliveries).
	Backfill *BackfillSettings `yaml:"backfill"`
	// RecordOnly says that no destination lists the source on purpose:
	// its events are recorded (and can be replayed to a destination
	// later) but delivered nowhere. Without it, such a source is warned
	// about; with it, a destination listing the source is an error.
	RecordOnly bool `yaml:"record_only"`
	// Overload: what happens to this source's requests while the gateway
	// is over capacity (ingest.max_queue_wait): shed (503 at once, the
	// provider retries) or queue (wait, however long). Default shed when
	// the provider retries a 503 by itself, else queue.
	Overload string `yaml:"overload"`

	// Destinations is derived: the destinations that list this source.
	Destinations []string `yaml:"-"`
}

// Signature is a generic source's HMAC scheme. None is set by the scalar
// value "none".
type Signature struct {
	None      bool   `yaml:"-"`
	Header    string `yaml:"header"`    // required
	Algorithm string `yaml:"algorithm"` // sha1 | sha256 | sha512; default sha256
	Encoding  string `yaml:"encoding"`  // hex | base64; default hex
	Prefix    string `yaml:"prefix"`    // e.g. "sha256="
}

// Ordering holds the staleness rule of a source (SPEC §7).
type Ordering struct {
	Object  string `yaml:"object"`  // header:NAME or json:PATH
	Version string `yaml:"version"` // header:NAME or json:PATH
	// Stale says what happens to an event older than the newest seen for
	// its object: deliver (the default, for every provider) sends it with
	// X-AnyHook-Stale: true; skip records it and skips its deliveries.
	Stale string `yaml:"stale"`
}

// RateLimit caps the requests a source accepts (a token bucket per source
// and process): over it, ingest answers 429 with Retry-After.
type RateLimit struct {
	RPS   int `yaml:"rps"`   // required: sustained requests per second, ≥ 1
	Burst int `yaml:"burst"` // default rps: requests allowed at once
}

// BackfillSettings name, for a GitHub source, the webhook whose
// deliveries a backfill lists: a repository's (Repo: owner/name) or an
// organization's (Org), by its HookID.
type BackfillSettings struct {
	Repo   string `yaml:"repo"`
	Org    string `yaml:"org"`
	HookID int64  `yaml:"hook_id"`
}

// BackfillProviders are the providers a backfill can read.
var BackfillProviders = []string{"stripe", "github", "paddle"}

// Destination is one user handler.
type Destination struct {
	Name string `yaml:"-"`
	// Type is the destination's kind: http (default), nats, rabbitmq or
	// kafka, each broker with its block below (docs/destinations.md);
	// pull is reserved.
	Type     string    `yaml:"type"`
	NATS     *NATS     `yaml:"nats"`
	RabbitMQ *RabbitMQ `yaml:"rabbitmq"`
	Kafka    *Kafka    `yaml:"kafka"`

	URL           string   `yaml:"url"`            // required for type http
	Sources       []string `yaml:"sources"`        // required
	SigningSecret string   `yaml:"signing_secret"` // Standard Webhooks whsec_…; optional
	Timeout       Duration `yaml:"timeout"`        // default 15s
	MaxAttempts   int      `yaml:"max_attempts"`   // default 8
	Backoff       Backoff  `yaml:"backoff"`
	OnStaleClaim  string   `yaml:"on_stale_claim"` // reclaim | hold; default reclaim
	DropHeaders   []string `yaml:"drop_headers"`   // more request headers not to forward
	MaxInFlight   int      `yaml:"max_in_flight"`  // default 64
	// Rate caps requests to this destination per process (retries
	// included); zero (default): no cap beyond MaxInFlight.
	Rate Rate `yaml:"rate"`
	// TLSInsecureSkipVerify turns off verification of the destination's
	// TLS certificate; default false (verified).
	TLSInsecureSkipVerify bool                `yaml:"tls_insecure_skip_verify"`
	StalePolicy           anyhook.StalePolicy `yaml:"-"`
	// Filter is a CEL expression over the event (internal/route); only
	// events it is true for are delivered here. Default: every event of
	// the sources.
	Filter string `yaml:"filter"`
	// Order is "per_object": the deliveries of one (source, object) go
	// one at a time, in version order; every source listed must have
	// ordering rules. Default "": no order, deliveries go at once.
	Order string `yaml:"order"`
	// AutoPause pauses the destination by itself while it keeps failing
	// (a circuit breaker) and tries one delivery every probe_every until
	// one succeeds. Default none: never paused but by a person.
	AutoPause *AutoPause `yaml:"auto_pause"`

	// Headers are static request headers sent with every delivery here
	// (an API key, a tenant); values may use ${VAR} and are secrets:
	// never shown, logged or stored. Default none.
	Headers map[string]string `yaml:"headers"`
	// Auth is the destination's own credential, added at send time:
	// exactly one of bearer, basic or oauth2. Default none.
	Auth *DestinationAuth `yaml:"auth"`
	// TLS is mutual TLS to the destination and the CAs it is verified
	// with, read again when the files change. Default none: no client
	// certificate, the system's CAs.
	TLS *DestinationTLS `yaml:"tls"`
	// Proxy is the http:// or https:// URL of the proxy the destination
	// (and its oauth2 token_url) is reached through; it may hold
	// user:password. Default: HTTPS_PROXY, HTTP_PROXY and NO_PROXY.
	Proxy string `yaml:"proxy"`
	// MaxAge (type: pull only) makes dead the deliveries no consumer
	// settled within it of their creation; default none: kept until
	// leased.
	MaxAge Duration `yaml:"max_age,omitempty"`
	// AlertBacklogAfter (type: pull only) raises a pull_backlog alert
	// when its oldest due delivery has waited this long; default 1h.
	AlertBacklogAfter Duration `yaml:"alert_backlog_after,omitempty"`
}

// DefaultAlertBacklogAfter is a pull destination's alert_backlog_after.
const DefaultAlertBacklogAfter = time.Hour

// DestinationAuth is a destination's own credential; exactly one field
// is set.
type DestinationAuth struct {
	Bearer string       `yaml:"bearer"` // sent as Authorization: Bearer …
	Basic  *BasicAuth   `yaml:"basic"`
	OAuth2 *OAuth2Creds `yaml:"oauth2"`
}

// BasicAuth is HTTP Basic authentication (RFC 7617).
type BasicAuth struct {
	User     string `yaml:"user"` // required; no ':'
	Password string `yaml:"password"`
}

// OAuth2Creds is the OAuth2 client credentials grant (RFC 6749 §4.4):
// the token is fetched from TokenURL, cached, refreshed before it
// expires and once more when the destination answers 401.
type OAuth2Creds struct {
	TokenURL     string   `yaml:"token_url"`     // required: https://, or http:// to loopback
	ClientID     string   `yaml:"client_id"`     // required
	ClientSecret string   `yaml:"client_secret"` // required
	Scopes       []string `yaml:"scopes"`        // default none
}

// DestinationTLS is a destination's TLS: a client certificate (mutual
// TLS), the CAs its certificate must chain to, and the name it must
// bear. Files are read again when they change.
type DestinationTLS struct {
	ClientCertFile string `yaml:"client_cert_file"` // PEM; with client_key_file
	ClientKeyFile  string `yaml:"client_key_file"`  // PEM; with client_cert_file
	CAFile         string `yaml:"ca_file"`          // PEM; default the system's CAs
	ServerName     string `yaml:"server_name"`      // default the URL's host
}

// The bounds of a pull destination's max_age.
const (
	MinPullMaxAge = time.Minute
	MaxPullMaxAge = 366 * 24 * time.Hour
)

// The destination types (Destination.Type).
const (
	TypeHTTP     = "http"
	TypeNATS     = "nats"
	TypeRabbitMQ = "rabbitmq"
	TypeKafka    = "kafka"
	TypePull     = "pull" // consumers lease its deliveries (docs/pull.md)
)

// NATS is a type: nats destination: each delivery is a message published
// to a JetStream stream.
type NATS struct {
	URL     string `yaml:"url"`     // required: nats://host:port (or tls://), comma-separated for a cluster
	Subject string `yaml:"subject"` // required: no wildcards
	// Stream is the JetStream stream that must store Subject; at start
	// its duplicate window must cover the destination's lease.
	Stream string `yaml:"stream"`
}

// RabbitMQ is a type: rabbitmq destination: each delivery is a persistent
// message published with confirms and mandatory.
type RabbitMQ struct {
	URL        string `yaml:"url"`         // required: amqp:// or amqps://
	Exchange   string `yaml:"exchange"`    // default "": the default exchange (routing_key names the queue)
	RoutingKey string `yaml:"routing_key"` // required with the default exchange
}

// Kafka is a type: kafka destination: each delivery is a record produced
// by an idempotent producer with acks=all.
type Kafka struct {
	Brokers []string `yaml:"brokers"` // required: host:port of one or more seed brokers
	Topic   string   `yaml:"topic"`   // required
}

// AutoPause is a destination's breaker: exactly one rule of
// consecutive_failures, or failure_rate with window.
type AutoPause struct {
	// ConsecutiveFailures trips after this many failed attempts in a
	// row (2 to 10000).
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// FailureRate trips when at least this share (above 0, at most 1)
	// of the last Window attempts failed (Window 10 to 10000).
	FailureRate float64 `yaml:"failure_rate"`
	Window      int     `yaml:"window"`
	// ProbeEvery is how often one delivery is tried while paused;
	// default 30s, 1s to 1h.
	ProbeEvery Duration `yaml:"probe_every"`
}

// The bounds of auto_pause.
const (
	MinConsecutiveFailures = 2
	MaxBreakerCount        = 10000 // consecutive_failures and window
	MinBreakerWindow       = 10
	DefaultProbeEvery      = 30 * time.Second
	MinProbeEvery          = time.Second
	MaxProbeEvery          = time.Hour
)

// OrderPerObject is the one value of a destination's order.
const OrderPerObject = "per_object"

// Backoff is the retry schedule: exponential from Initial, capped at Max,
// jittered.
type Backoff struct {
	Initial Duration `yaml:"initial"` // default 5s
	Max     Duration `yaml:"max"`     // default 2h
}

// Token is one named token: who presents it is known by Name (the actor
// of what it does) and may do what Scopes say: admin, read or
// pull:DESTINATION.
type Token struct {
	Name   string   `yaml:"name"`   // required, unique; "admin" is admin_token's when that is set
	Token  string   `yaml:"token"`  // required, ${VAR}; at least 16 characters; never logged or shown
	Scopes []string `yaml:"scopes"` // required: admin, read, pull:DESTINATION
}

// Alert is one alert channel; exactly one field is set.
type Alert struct {
	Webhook   string     `yaml:"webhook"`
	Slack     string     `yaml:"slack"`
	PagerDuty *PagerDuty `yaml:"pagerduty"`
}

// PagerDuty is an Events v2 alert channel.
type PagerDuty struct {
	RoutingKey string `yaml:"routing_key"` // required: the integration key
	// URL is the Events v2 endpoint; default
	// https://events.pagerduty.com/v2/enqueue (EU accounts:
	// https://events.eu.pagerduty.com/v2/enqueue).
	URL string `yaml:"url"`
}

// PagerDutyURL is the default Events v2 endpoint.
const PagerDutyURL = alert.PagerDutyURL

// DeliverySettings tune the workers; rarely changed.
type DeliverySettings struct {
	PollInterval Duration `yaml:"poll_interval"` // default 1s; new events wake workers at once
	Grace        Duration `yaml:"grace"`         // lease = timeout + grace; default 5s, at most 10s
	Shutdown     Duration `yaml:"shutdown"`      // in-flight grace at SIGTERM; default 10s
}

// IngestSettings bound how much the gateway takes in.
type IngestSettings struct {
	// MaxQueueWait: while a request would wait longer than this for the
	// store (what is queued, or the requests in progress, over the recent
	// commit rate), the requests of
	// sources with overload: shed are answered 503 at once. Default 50ms;
	// 0 never sheds.
	MaxQueueWait Duration `yaml:"max_queue_wait"`
}

// Duration is a time.Duration written as a Go duration string.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Size is a byte count written as 1024, 512KiB, 10MiB or 1GiB.
type Size int64

// Bytes returns s as an int64.
func (s Size) Bytes() int64 { return int64(s) }
