package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/alert"
	"github.com/anyhook/anyhook/internal/auth"
	"github.com/anyhook/anyhook/internal/backfill"
	"github.com/anyhook/anyhook/internal/buildinfo"
	"github.com/anyhook/anyhook/internal/certs"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/route"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/throttle"
)

// This file is where the configuration meets the components: each
// function turns the settings of one part of a *config.Config into the
// types of the package that runs it (as litestream's
// NewS3ReplicaClientFromConfig does), so no component imports config and
// no other file of the gateway reads a component's settings from it.
// Their errors locate the offending key (file, key and line).

// StoreOptions are Open's.
type StoreOptions struct {
	// Logger is told of the migrations Open applies; nil: nothing.
	Logger *slog.Logger
	// NoUpgrade refuses a store whose schema is older than this binary
	// rather than upgrade it (sqlstore.ErrUpgradeRefused): for the
	// commands that only read.
	NoUpgrade bool
}

// Open opens the store that cfg.Database names.
func Open(ctx context.Context, cfg *config.Config, opt StoreOptions) (store.Store, error) {
	if path, ok := cfg.SQLitePath(); ok {
		st, err := sqlite.Open(ctx, path, sqlite.Options{Logger: opt.Logger, NoUpgrade: opt.NoUpgrade})
		if err != nil {
			return nil, fmt.Errorf("%s: database: %w", cfg.Path, err)
		}
		return st, nil
	}
	if dsn, ok := cfg.PostgresURL(); ok {
		st, err := postgres.Open(ctx, dsn, postgres.Options{Logger: opt.Logger, NoUpgrade: opt.NoUpgrade})
		if err != nil {
			return nil, fmt.Errorf("%s: database: %w", cfg.Path, err)
		}
		return st, nil
	}
	return nil, cfg.Errorf("database", "%q is neither sqlite:PATH nor postgres://…", cfg.Database)
}

// ingestSources builds the provider and ingest settings of each source
// named (every source of cfg when none is); the error lists the problem
// of each source that has one.
func ingestSources(cfg *config.Config, names ...string) ([]ingest.Source, error) {
	if len(names) == 0 {
		names = cfg.SourceOrder
	}
	var out []ingest.Source
	var errs []error
	for _, name := range names {
		src := cfg.Sources[name]
		if src == nil {
			continue // not a source: the caller says so (Backfiller.Check)
		}
		p, err := provider.New(src.ProviderSettings())
		if err != nil {
			errs = append(errs, cfg.SourceError(name, err))
			continue
		}
		filters, err := Filters(cfg, src.Destinations)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ingest.Source{
			Name:         name,
			Provider:     p,
			MaxBody:      src.MaxBody.Bytes(),
			PublicURL:    src.PublicURL,
			Destinations: src.Destinations,
			Filters:      filters,
			// Stale events are delivered, flagged, unless the source
			// says stale: skip: skipping by default would silently drop
			// late payment events that share an object.
			StaleSkip:     src.Ordering != nil && src.Ordering.Stale == "skip",
			SecretHeaders: provider.CredentialHeaders(src.Provider),
			Shed:          src.Overload == "shed",
		})
	}
	if err := config.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// requestIDs reads, for the rejection log, the values that name a
// request to a configured source without being secret (provider.Identifier).
func requestIDs(cfg *config.Config) func(source string, h http.Header, body []byte) []anyhook.RequestID {
	by := map[string]func(http.Header, []byte) []anyhook.RequestID{}
	for name, src := range cfg.Sources {
		by[name] = provider.Identifier(src.ProviderSettings())
	}
	return func(source string, h http.Header, body []byte) []anyhook.RequestID {
		if f := by[source]; f != nil {
			return f(h, body)
		}
		return nil
	}
}

// deliveryDestinations checks each destination's signing secret and gives
// its delivery settings; log is told when a client certificate is
// reloaded (nil: nobody).
func deliveryDestinations(cfg *config.Config, log *slog.Logger) ([]delivery.Destination, error) {
	var out []delivery.Destination
	var errs []error
	for _, name := range cfg.DestinationOrder {
		d := cfg.Destinations[name]
		if d == nil {
			continue // config.Validate says so
		}
		if d.SigningSecret != "" {
			if err := provider.Sign("standard", d.SigningSecret, &provider.Request{}, time.Now()); err != nil {
				errs = append(errs, cfg.Errorf("destinations."+name+".signing_secret", "%v", err))
				continue
			}
		}
		pub, err := publisher(cfg, d) // a broker kind's client; nil for http
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var ap *delivery.AutoPause
		if a := d.AutoPause; a != nil {
			ap = &delivery.AutoPause{ConsecutiveFailures: a.ConsecutiveFailures, FailureRate: a.FailureRate, Window: a.Window, ProbeEvery: a.ProbeEvery.D()}
		}
		reach, err := destinationReach(cfg, name, d, log)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, delivery.Destination{
			Name:          name,
			URL:           d.URL,
			SigningSecret: d.SigningSecret,
			Timeout:       d.Timeout.D(),
			MaxAttempts:   d.MaxAttempts,
			Initial:       d.Backoff.Initial.D(),
			Max:           d.Backoff.Max.D(),
			StalePolicy:   d.StalePolicy,
			DropHeaders:   d.DropHeaders,
			MaxInFlight:   d.MaxInFlight,

			InsecureSkipVerify: d.TLSInsecureSkipVerify,
			Rate:               d.Rate.PerSecond(),
			InOrder:            d.Order == config.OrderPerObject,
			AutoPause:          ap,
			Pull:               d.Type == config.TypePull,
			MaxAge:             d.MaxAge.D(),

			Headers: reach.Headers,
			Auth:    reach.Auth,
			TLS:     reach.TLS,
			RootCAs: reach.RootCAs,
			Proxy:   reach.Proxy,
			// Broker kinds (docs/destinations.md); nil for http.
			Publisher: pub,
		})
	}
	if err := config.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// authTokens are the tokens of cfg: admin_token as the token named
// "admin" with scope admin, then cfg.Tokens. None: authentication is off
// (the config allows it on loopback only).
func authTokens(cfg *config.Config) *auth.Tokens {
	var ts []auth.Token
	if cfg.AdminToken != "" {
		ts = append(ts, auth.Token{Name: auth.AdminTokenName, Secret: cfg.AdminToken, Scopes: []string{auth.ScopeAdmin}})
	}
	for _, t := range cfg.Tokens {
		ts = append(ts, auth.Token{Name: t.Name, Secret: t.Token, Scopes: t.Scopes})
	}
	return auth.New(ts)
}

// alertChannels gives the alert channels of cfg.Alerts, in order.
func alertChannels(cfg *config.Config) []alert.Channel {
	out := make([]alert.Channel, len(cfg.Alerts))
	for i, a := range cfg.Alerts {
		out[i] = alert.Channel{Webhook: a.Webhook, Slack: a.Slack}
		if pd := a.PagerDuty; pd != nil {
			out[i].PagerDuty = &alert.PagerDuty{RoutingKey: pd.RoutingKey, URL: pd.URL}
		}
	}
	return out
}

// deliveryOptions gives the engine's settings from cfg (its callbacks and
// observer are the gateway's to add).
func deliveryOptions(cfg *config.Config, dests []delivery.Destination) delivery.Options {
	return delivery.Options{
		Destinations: dests,
		PollInterval: cfg.Delivery.PollInterval.D(),
		Grace:        cfg.Delivery.Grace.D(),
		UserAgent:    userAgent(),
	}
}

// sourceBuckets gives the token bucket of each source with a rate_limit.
func sourceBuckets(cfg *config.Config) map[string]*throttle.Bucket {
	buckets := map[string]*throttle.Bucket{}
	for name, s := range cfg.Sources {
		if s != nil && s.RateLimit != nil {
			buckets[name] = throttle.NewBucket(s.RateLimit.RPS, s.RateLimit.Burst)
		}
	}
	return buckets
}

// sourceDestinations gives each source's destinations, for the admin API
// and the dashboard.
func sourceDestinations(cfg *config.Config) map[string][]string {
	out := map[string][]string{}
	for _, name := range cfg.SourceOrder {
		out[name] = cfg.Sources[name].Destinations
	}
	return out
}

// checkpointerOptions gives the ledger's checkpointer settings (the log:
// section) for key (its logger, clock and failure callback are the
// gateway's to add).
func checkpointerOptions(cfg *config.Config, key *ledger.Key) ledger.CheckpointerOptions {
	return ledger.CheckpointerOptions{
		Key:       key,
		Origin:    cfg.Ledger.Origin,
		Interval:  cfg.Ledger.CheckpointInterval.D(),
		PushURL:   cfg.Ledger.PushURL,
		Retention: cfg.Ledger.Retention.D(),
		// The incidents' retention rides on the same round.
		IncidentRetention: cfg.Incidents.Retention.D(),
	}
}

// Check runs the checks New makes of a loaded configuration beyond
// config.Validate, without opening the store or listening: it builds every
// source's provider (so a Stripe secret that does not start with whsec_
// fails here as it does at start), checks every destination's signing
// secret and builds the alert channels. `anyhook config check` runs it, and
// serve before it listens, so that a mistake in the config is reported as
// such even when the address is in use. The error is a *ConfigError
// listing every problem found (config.List reads them), in line order.
func Check(cfg *config.Config) error {
	_, srcErr := ingestSources(cfg)
	dests, destErr := deliveryDestinations(cfg, nil)
	closePublishers(dests) // built to be checked, never used
	alertErr := alert.CheckChannels(alertChannels(cfg))
	if err := config.Join(srcErr, destErr, alertErr); err != nil {
		return &ConfigError{err}
	}
	return nil
}

// userAgent is what the gateway's outbound requests (deliveries, alerts)
// say they are: AnyHook and the build's version (internal/buildinfo).
func userAgent() string { return "AnyHook/" + buildinfo.Version() }

// Filters compiles the filters of the named destinations that have one,
// by name; nil when none has. config.Validate has compiled each already
// (its error names file, key and line), so an error here is one of a
// config that was not validated.
func Filters(cfg *config.Config, destinations []string) (map[string]*route.Filter, error) {
	var m map[string]*route.Filter
	for _, d := range destinations {
		dc := cfg.Destinations[d]
		if dc == nil || dc.Filter == "" {
			continue
		}
		f, err := route.Compile(dc.Filter)
		if err != nil {
			return nil, cfg.Errorf("destinations."+d+".filter", "%s", err)
		}
		if m == nil {
			m = map[string]*route.Filter{}
		}
		m[d] = f
	}
	return m, nil
}

// certOptions are the certs.Options of a tls: block of cfg (nil: plain
// HTTP).
func certOptions(cfg *config.Config, t *config.TLS, log *slog.Logger) (*certs.Options, error) {
	if t == nil {
		return nil, nil
	}
	o := &certs.Options{Logger: log}
	if t.ACME != nil {
		a := &certs.ACME{Domains: t.ACME.Domains, Email: t.ACME.Email, CA: t.ACME.CA, Storage: cfg.ACMEStoragePath()}
		if t.ACME.CARoot != "" {
			pool, err := config.LoadCertPool(cfg.FilePath(t.ACME.CARoot))
			if err != nil {
				return nil, cfg.Errorf("tls.acme.ca_root", "%v", err)
			}
			a.Roots = pool
		}
		o.ACME = a
		return o, nil
	}
	o.CertFile, o.KeyFile = cfg.FilePath(t.CertFile), cfg.FilePath(t.KeyFile)
	if t.ClientCA != "" {
		pool, err := config.LoadCertPool(cfg.FilePath(t.ClientCA))
		if err != nil {
			return nil, cfg.Errorf("admin.tls.client_ca", "%v", err)
		}
		o.ClientCAs = pool
	}
	return o, nil
}

// backfillSources are the backfill settings of each source of cfg; a
// source that cannot be backfilled says why, naming its key.
func backfillSources(cfg *config.Config) map[string]backfill.Source {
	out := make(map[string]backfill.Source, len(cfg.Sources))
	for name, src := range cfg.Sources {
		b := backfill.Source{Provider: src.Provider, Client: backfill.Client{Base: src.APIBase, Key: src.APIKey, UserAgent: userAgent()}}
		switch {
		case !slices.Contains(config.BackfillProviders, src.Provider):
			// Said first: an api_key would not help.
			b.Refused = cfg.Errorf("sources."+name+".provider", "provider %s has no backfill (backfill reads %s)", src.Provider, strings.Join(config.BackfillProviders, ", "))
		case src.APIKey == "":
			b.Refused = cfg.Errorf("sources."+name, "%v", backfill.ErrNoAPIKey)
		case src.Provider == "github" && src.Backfill == nil:
			b.Refused = cfg.Errorf("sources."+name+".provider", "provider %s has no backfill", src.Provider)
		case src.Backfill != nil:
			b.Repo, b.Org, b.HookID = src.Backfill.Repo, src.Backfill.Org, src.Backfill.HookID
		}
		out[name] = b
	}
	return out
}

// destinationReach gives how destination name is reached: its headers,
// credential, TLS and proxy (config.Validate has checked each; an error
// here is a file that changed since, or a config not validated).
func destinationReach(cfg *config.Config, name string, d *config.Destination, log *slog.Logger) (delivery.Destination, error) {
	k := "destinations." + name
	var out delivery.Destination
	if len(d.Headers) > 0 {
		out.Headers = http.Header{}
		for h, v := range d.Headers {
			out.Headers.Set(h, v)
		}
	}
	if a := d.Auth; a != nil {
		out.Auth = &delivery.Auth{Bearer: a.Bearer}
		if a.Basic != nil {
			out.Auth.Basic = &delivery.BasicAuth{User: a.Basic.User, Password: a.Basic.Password}
		}
		if o := a.OAuth2; o != nil {
			out.Auth.OAuth2 = &delivery.OAuth2{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes}
		}
	}
	if t := d.TLS; t != nil {
		o := certs.ClientOptions{CertFile: cfg.FilePath(t.ClientCertFile), KeyFile: cfg.FilePath(t.ClientKeyFile), ServerName: t.ServerName, Logger: log}
		if t.CAFile != "" {
			cas, err := certs.NewCAFile(cfg.FilePath(t.CAFile), log)
			if err != nil {
				return out, cfg.Errorf(k+".tls.ca_file", "%v", err)
			}
			out.RootCAs = cas
		}
		if t.ClientCertFile == "" {
			o.CertFile, o.KeyFile = "", ""
		}
		tc, err := certs.ClientConfig(o)
		if err != nil {
			// Said as config.Validate says it, so that config check
			// lists it once.
			if cause := errors.Unwrap(err); cause != nil {
				err = cause
			}
			return out, cfg.Errorf(k+".tls.client_cert_file", "%s and %s: %s", t.ClientCertFile, t.ClientKeyFile, err)
		}
		out.TLS = tc
	}
	if d.Proxy != "" {
		u, err := url.Parse(d.Proxy)
		if err != nil {
			return out, cfg.Errorf(k+".proxy", "not a valid URL") // never quoted: it may hold a password
		}
		out.Proxy = u
	}
	return out, nil
}

// destinationsReach says, for the API, how each destination is reached,
// without a secret: its credential's kind, its headers' names, whether it
// has a client certificate, and its proxy without user or password.
func destinationsReach(cfg *config.Config) map[string]admin.Reach {
	out := map[string]admin.Reach{}
	for name, d := range cfg.Destinations {
		if d == nil {
			continue
		}
		r := admin.Reach{Type: d.Type}
		if d.Auth != nil {
			switch {
			case d.Auth.Basic != nil:
				r.Auth = "basic"
			case d.Auth.OAuth2 != nil:
				r.Auth = "oauth2"
			case d.Auth.Bearer != "":
				r.Auth = "bearer"
			}
		}
		for h := range d.Headers {
			r.Headers = append(r.Headers, http.CanonicalHeaderKey(h))
		}
		slices.Sort(r.Headers)
		r.ClientCert = d.TLS != nil && d.TLS.ClientCertFile != ""
		if u, err := url.Parse(d.Proxy); err == nil && d.Proxy != "" {
			r.Proxy = u.Scheme + "://" + u.Host
		}
		out[name] = r
	}
	return out
}

// destinationKinds is each destination's type, for the dashboard.
func destinationKinds(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for name, d := range cfg.Destinations {
		if d != nil {
			out[name] = d.Type
		}
	}
	return out
}
