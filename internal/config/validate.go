package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/alert"
	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/route"
)

// Defaults, as documented on the fields and in docs/configuration.md.
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultDatabase     = "sqlite:anyhook.db"
	DefaultTolerance    = provider.DefaultTolerance
	DefaultMaxBody      = 10 << 20
	DefaultTimeout      = 15 * time.Second
	DefaultMaxAttempts  = 8
	DefaultBackoffInit  = 5 * time.Second
	DefaultBackoffMax   = 2 * time.Hour
	DefaultMaxInFlight  = 64
	DefaultPollInterval = time.Second
	DefaultGrace        = 5 * time.Second
	MaxGrace            = 10 * time.Second
	DefaultShutdown     = 10 * time.Second
	// DefaultMaxQueueWait bounds the estimated wait for the store. 25 ms
	// kept the tail at twice capacity under 100 ms but shed bursts of a
	// few hundred requests on an idle gateway, and every burst on a disk
	// whose sync takes 20 ms (BENCHMARKS.md, "A tighter admission bound").
	DefaultMaxQueueWait = 50 * time.Millisecond
	MaxMaxQueueWait     = 10 * time.Second

	DefaultResolveAfter   = 5 * time.Minute
	DefaultReopenWithin   = 30 * time.Minute
	DefaultEscalateEvents = 10
	DefaultEscalateAfter  = 15 * time.Minute
	DefaultIncidentKeep   = 90 * 24 * time.Hour
)

// setDefaults fills every value left out of the file. A value written
// explicitly (even as 0) is kept, so that Validate can reject it.
func (c *Config) setDefaults() {
	str := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	dur := func(p *Duration, key string, v time.Duration) {
		if *p == 0 && !c.has(key) {
			*p = Duration(v)
		}
	}
	integer := func(p *int, key string, v int) {
		if *p == 0 && !c.has(key) {
			*p = v
		}
	}
	if !c.has("listen") {
		str(&c.Listen, DefaultListen)
	}
	if !c.has("database") {
		str(&c.Database, DefaultDatabase)
	}
	c.SourceOrder = order(c.SourceOrder, c.Sources)
	c.DestinationOrder = order(c.DestinationOrder, c.Destinations)

	for _, name := range c.SourceOrder {
		s := c.Sources[name]
		if s == nil {
			continue
		}
		k := "sources." + name + "."
		s.Name = name
		dur(&s.Tolerance, k+"tolerance", DefaultTolerance)
		if s.MaxBody == 0 && !c.has(k+"max_body") {
			s.MaxBody = DefaultMaxBody
		}
		if sig := s.Signature; sig != nil && !sig.None {
			str(&sig.Algorithm, "sha256")
			str(&sig.Encoding, "hex")
		}
		if s.Ordering != nil {
			str(&s.Ordering.Stale, "deliver")
		}
		if provider.Retries(s.Provider) {
			str(&s.Overload, "shed")
		} else {
			str(&s.Overload, "queue")
		}
		if rl := s.RateLimit; rl != nil && rl.Burst == 0 && !c.has(k+"rate_limit.burst") {
			rl.Burst = rl.RPS
		}
		s.Destinations = nil
	}
	for _, name := range c.DestinationOrder {
		d := c.Destinations[name]
		if d == nil {
			continue
		}
		k := "destinations." + name + "."
		d.Name = name
		str(&d.Type, TypeHTTP)
		if d.Type == TypePull {
			dur(&d.AlertBacklogAfter, k+"alert_backlog_after", DefaultAlertBacklogAfter)
		}
		dur(&d.Timeout, k+"timeout", DefaultTimeout)
		integer(&d.MaxAttempts, k+"max_attempts", DefaultMaxAttempts)
		dur(&d.Backoff.Initial, k+"backoff.initial", DefaultBackoffInit)
		dur(&d.Backoff.Max, k+"backoff.max", DefaultBackoffMax)
		str(&d.OnStaleClaim, string(anyhook.Reclaim))
		d.StalePolicy = anyhook.StalePolicy(d.OnStaleClaim)
		integer(&d.MaxInFlight, k+"max_in_flight", DefaultMaxInFlight)
		if ap := d.AutoPause; ap != nil {
			dur(&ap.ProbeEvery, k+"auto_pause.probe_every", DefaultProbeEvery)
		}
		for _, src := range d.Sources {
			if s := c.Sources[src]; s != nil && !slices.Contains(s.Destinations, name) {
				s.Destinations = append(s.Destinations, name)
			}
		}
	}
	for i := range c.Alerts {
		if pd := c.Alerts[i].PagerDuty; pd != nil {
			str(&pd.URL, PagerDutyURL)
		}
	}
	dur(&c.AlertWindow, "alert_window", alert.DefaultWindow)
	dur(&c.Incidents.ResolveAfter, "incidents.resolve_after", DefaultResolveAfter)
	dur(&c.Incidents.ReopenWithin, "incidents.reopen_within", DefaultReopenWithin)
	integer(&c.Incidents.EscalateEvents, "incidents.escalate_events", DefaultEscalateEvents)
	dur(&c.Incidents.EscalateAfter, "incidents.escalate_after", DefaultEscalateAfter)
	dur(&c.Incidents.Retention, "incidents.retention", DefaultIncidentKeep)
	dur(&c.Delivery.PollInterval, "delivery.poll_interval", DefaultPollInterval)
	dur(&c.Delivery.Grace, "delivery.grace", DefaultGrace)
	dur(&c.Delivery.Shutdown, "delivery.shutdown", DefaultShutdown)
	dur(&c.Ingest.MaxQueueWait, "ingest.max_queue_wait", DefaultMaxQueueWait)
	c.setLedgerDefaults()
	c.setListenDefaults()
}

// order returns the names of m in file order, falling back to sorted
// order for a Config built in code.
func order[T any](names []string, m map[string]T) []string {
	if len(names) == len(m) {
		return names
	}
	out := make([]string, 0, len(m))
	for name := range m {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

var (
	nameRe   = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	headerRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// Validate checks the whole configuration (defaults already applied) and
// returns every problem it finds as an Errors, in line order, each naming
// its key and line; nil when there is none. Provider-specific rules (which
// secrets a provider needs and in which form, a generic source's
// signature) are checked by internal/provider, which config calls. What
// is legal but likely a mistake is kept for Warnings.
func (c *Config) Validate() error {
	var p problems
	c.notes = nil
	p.add(c.validateServer())
	p.add(c.validateListeners())
	if len(c.Sources) == 0 {
		p.add(c.Errorf("sources", "at least one source is required"))
	}
	for _, name := range c.SourceOrder {
		p.add(c.validateSource(name, c.Sources[name]))
	}
	for _, name := range c.DestinationOrder {
		p.add(c.validateDestination(name, c.Destinations[name]))
	}
	for i, a := range c.Alerts {
		p.add(c.validateAlert(fmt.Sprintf("alerts[%d]", i), a))
	}
	if c.AlertWindow.D() < time.Second {
		p.add(c.Errorf("alert_window", "must be at least 1s, not %s", c.AlertWindow))
	}
	p.add(c.validateDelivery())
	p.add(c.validateIncidents())
	p.add(c.validateLedger())
	return p.err()
}

// Warnings are what the file says that is legal but likely a mistake (a
// source no destination lists, a secret with white space around it), in
// line order, each naming its key and line as an error does. serve logs
// them and config check prints them; neither refuses the file.
func (c *Config) Warnings() []*Error {
	ws := append(slices.Clone(c.warnings), c.notes...)
	slices.SortStableFunc(ws, func(a, b *Error) int { return a.Line - b.Line })
	return ws
}

func (c *Config) warnf(key, format string, args ...any) {
	c.notes = append(c.notes, c.Errorf(key, format, args...).(*Error))
}

func (c *Config) validateServer() error {
	var p problems
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		p.add(c.Errorf("listen", "must be HOST:PORT such as 127.0.0.1:8080, not %q", c.Listen))
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.add(c.Errorf("listen", "invalid port %q", port))
	}
	switch {
	case c.has("admin_token") && strings.TrimSpace(c.AdminToken) == "":
		// Likely ${VAR} with VAR set but empty: never silently open.
		p.add(c.Errorf("admin_token", "is empty; remove the key to run without a token (loopback only)"))
	case !c.hasAdminToken() && err == nil && !isLoopback(host) && !c.AdminSeparate():
		key := "admin_token"
		if !c.has(key) {
			key = "listen"
		}
		p.add(c.Errorf(key, "admin_token is required when listen (%s) is not a loopback address (or a token in tokens with scope admin)", c.Listen))
	case !c.hasAdminToken() && c.AdminSeparate():
		if h, _, err := net.SplitHostPort(c.Admin.Listen); err == nil && !isLoopback(h) {
			key := "admin_token"
			if !c.has(key) {
				key = "admin.listen"
			}
			p.add(c.Errorf(key, "admin_token is required when admin.listen (%s) is not a loopback address (or a token in tokens with scope admin)", c.Admin.Listen))
		}
	}
	p.add(c.validateTokens())
	if c.DashboardURL != "" {
		if err := checkHTTPURL(c.DashboardURL); err != nil {
			p.add(c.Errorf("dashboard_url", "%s", err))
		}
	}
	switch {
	case strings.HasPrefix(c.Database, "sqlite:"):
		if f := strings.TrimPrefix(c.Database, "sqlite:"); f == "" || strings.HasPrefix(f, "//") {
			p.add(c.Errorf("database", "must be sqlite:PATH, e.g. sqlite:anyhook.db or sqlite:/var/lib/anyhook/anyhook.db"))
		}
	case strings.HasPrefix(c.Database, "postgres://"), strings.HasPrefix(c.Database, "postgresql://"):
		if _, err := url.Parse(c.Database); err != nil {
			p.add(c.Errorf("database", "invalid PostgreSQL URL")) // the URL may hold a password: not quoted
		}
	default:
		p.add(c.Errorf("database", "must be sqlite:PATH or postgres://USER@HOST:PORT/DB"))
	}
	return p.err()
}

// hasAdminToken reports whether some token may do everything:
// admin_token, or a token in tokens with scope admin.
func (c *Config) hasAdminToken() bool {
	if c.AdminToken != "" {
		return true
	}
	for _, t := range c.Tokens {
		if slices.Contains(t.Scopes, ScopeAdmin) {
			return true
		}
	}
	return false
}

// The scopes of a token (internal/auth says what each may do).
const (
	ScopeAdmin = "admin"
	ScopeRead  = "read"
	ScopePull  = "pull:" // + a destination's name
)

// MinTokenLength is the fewest characters of a token in tokens: what
// stops guessing is a token's length.
const MinTokenLength = 16

// validateTokens checks tokens: names and tokens unique (admin_token is
// the token named "admin"), tokens long enough, scopes known and naming
// configured destinations. A token's value is never quoted.
func (c *Config) validateTokens() error {
	var p problems
	names := map[string]string{} // name → the key that took it
	secrets := map[string]string{}
	if c.AdminToken != "" {
		names["admin"], secrets[c.AdminToken] = "admin_token", "admin_token"
	}
	for i, t := range c.Tokens {
		k := fmt.Sprintf("tokens[%d]", i)
		switch {
		case t.Name == "":
			p.add(c.Errorf(k+".name", "required: the name under which the token's actions are recorded"))
		case !nameRe.MatchString(t.Name):
			p.add(c.Errorf(k+".name", "%q: use letters, digits, '_', '.' and '-'", t.Name))
		case names[t.Name] != "":
			p.add(c.Errorf(k+".name", "%q is taken by %s: token names are unique", t.Name, names[t.Name]))
		default:
			names[t.Name] = k
		}
		switch {
		case strings.TrimSpace(t.Token) == "":
			p.add(c.Errorf(k+".token", "required (is ${VAR} set?): the token itself, at least %d characters", MinTokenLength))
		case len(t.Token) < MinTokenLength:
			p.add(c.Errorf(k+".token", "is %d characters; a token needs at least %d (e.g. openssl rand -hex 32)", len(t.Token), MinTokenLength))
		case secrets[t.Token] != "":
			p.add(c.Errorf(k+".token", "is the same token as %s: each token is unique, so that its holder is known", secrets[t.Token]))
		default:
			secrets[t.Token] = k
		}
		if len(t.Scopes) == 0 {
			p.add(c.Errorf(k+".scopes", "required: one or more of admin, read, pull:DESTINATION"))
		}
		for j, s := range t.Scopes {
			sk := fmt.Sprintf("%s.scopes[%d]", k, j)
			dest, pull := strings.CutPrefix(s, ScopePull)
			switch {
			case s == ScopeAdmin, s == ScopeRead:
			case pull && dest == "":
				p.add(c.Errorf(sk, "pull: needs a destination, pull:DESTINATION"))
			case pull && c.Destinations[dest] == nil:
				p.add(c.Errorf(sk, "no destination %q (configured: %s)", dest, strings.Join(c.DestinationOrder, ", ")))
			case pull:
			default:
				p.add(c.Errorf(sk, "unknown scope %q: admin, read or pull:DESTINATION", s))
			}
		}
	}
	if len(c.Tokens) > 0 && !c.hasAdminToken() {
		p.add(c.Errorf("tokens", "no token has scope admin and admin_token is not set: nobody could pause, replay or resolve; give one token scope admin"))
	}
	return p.err()
}

// isLoopback reports whether host names this machine: localhost, or a
// loopback IP.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ownSource reports whether rawURL is this gateway's own ingest URL of
// one of its sources, and which: the listen port, on a loopback host or
// the listen host.
func (c *Config) ownSource(rawURL string) (string, bool) {
	u, err := url.Parse(rawURL)
	lhost, lport, lerr := net.SplitHostPort(c.Listen)
	if err != nil || lerr != nil {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port != lport || !(isLoopback(u.Hostname()) || strings.EqualFold(u.Hostname(), lhost)) {
		return "", false
	}
	rest, ok := strings.CutPrefix(u.Path, "/webhooks/")
	name, _, _ := strings.Cut(rest, "/")
	if _, known := c.Sources[name]; !ok || !known {
		return "", false
	}
	return name, true
}

func (c *Config) validateSource(name string, s *Source) error {
	k := "sources." + name
	if err := checkName(c, k, name); err != nil {
		return err
	}
	if s == nil {
		return c.Errorf(k, "must be a mapping with at least a provider")
	}
	var p problems
	// What a provider needs of a source (secrets, tolerance, public_url
	// for URL-bound schemes, signature, id and ordering rules) is checked
	// once, by the provider package; here it gets the file and line.
	if err := provider.Validate(s.ProviderSettings()); err != nil {
		p.add(c.SourceError(name, err))
	}
	if s.MaxBody <= 0 {
		p.add(c.Errorf(k+".max_body", "must be greater than 0"))
	}
	if s.PublicURL != "" {
		if err := checkHTTPURL(s.PublicURL); err != nil {
			p.add(c.Errorf(k+".public_url", "%s", err))
		}
	}
	p.add(c.validateBackfill(k, s))
	if rl := s.RateLimit; rl != nil {
		if rl.RPS < 1 {
			p.add(c.Errorf(k+".rate_limit.rps", "must be at least 1 request per second, not %d", rl.RPS))
		}
		if rl.Burst < 1 {
			p.add(c.Errorf(k+".rate_limit.burst", "must be at least 1, not %d", rl.Burst))
		}
	}
	if s.Overload != "shed" && s.Overload != "queue" {
		p.add(c.Errorf(k+".overload", "must be shed or queue, not %q", s.Overload))
	}
	if o := s.Ordering; o != nil && o.Stale != "skip" && o.Stale != "deliver" {
		p.add(c.Errorf(k+".ordering.stale", "must be skip or deliver, not %q", o.Stale))
	}
	switch {
	case s.RecordOnly && len(s.Destinations) > 0:
		n := len(s.Destinations)
		p.add(c.Errorf(k+".record_only", "is true, but %s %s %s the source: remove record_only, or the source from %s",
			plural(n, "destination", "destinations"), strings.Join(s.Destinations, ", "), plural(n, "lists", "list"), plural(n, "its sources", "their sources")))
	case !s.RecordOnly && len(s.Destinations) == 0:
		c.warnf(k, "no destination lists this source: its events are recorded but delivered nowhere; add it to a destination's sources, or set record_only: true if that is meant")
	}
	return p.err()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// validateBackfill checks api_key, api_base and backfill of source key k.
func (c *Config) validateBackfill(k string, s *Source) error {
	if s.APIKey == "" && s.APIBase == "" && s.Backfill == nil {
		return nil
	}
	if !slices.Contains(BackfillProviders, s.Provider) {
		key := k + ".api_key"
		switch {
		case s.APIKey == "" && s.APIBase != "":
			key = k + ".api_base"
		case s.APIKey == "" && s.APIBase == "":
			key = k + ".backfill"
		}
		return c.Errorf(key, "provider %s has no backfill (backfill reads %s)", s.Provider, strings.Join(BackfillProviders, ", "))
	}
	if s.APIBase != "" {
		if err := checkAPIBase(s.APIBase); err != nil {
			return c.Errorf(k+".api_base", "%s", err)
		}
	}
	b := s.Backfill
	if s.Provider != "github" {
		if b != nil {
			return c.Errorf(k+".backfill", "only a github source names a hook to backfill from; %s reads its events with api_key alone", s.Provider)
		}
		return nil
	}
	if b == nil {
		if s.APIKey != "" {
			return c.Errorf(k+".backfill", "a github source with an api_key names its hook: backfill: {repo: owner/name, hook_id: N} or {org: name, hook_id: N}")
		}
		return nil
	}
	if (b.Repo == "") == (b.Org == "") {
		return c.Errorf(k+".backfill", "give either repo: owner/name or org: name")
	}
	if owner, name, ok := strings.Cut(b.Repo, "/"); b.Repo != "" && (!ok || owner == "" || name == "" || strings.Contains(name, "/")) {
		return c.Errorf(k+".backfill.repo", "must be owner/name, not %q", b.Repo)
	}
	if b.HookID <= 0 {
		return c.Errorf(k+".backfill.hook_id", "must be the hook's id (a positive number)")
	}
	return nil
}

// ProviderSettings are the settings of s that its provider reads, in
// provider's terms.
func (s *Source) ProviderSettings() provider.Settings {
	ps := provider.Settings{
		Provider:  s.Provider,
		Secrets:   s.Secrets,
		Tolerance: s.Tolerance.D(),
		PublicURL: s.PublicURL,
		ID:        s.ID,
		Type:      s.Type,
	}
	if sig := s.Signature; sig != nil {
		ps.Signature = &provider.Signature{None: sig.None, Header: sig.Header, Algorithm: sig.Algorithm, Encoding: sig.Encoding, Prefix: sig.Prefix}
	}
	if o := s.Ordering; o != nil {
		ps.Ordering = &provider.Ordering{Object: o.Object, Version: o.Version}
	}
	return ps
}

// SourceError locates a *provider.SettingsError about source name (from
// provider.Validate or provider.New) as an *Error with the file, the full
// key and its line. Other errors are returned as they are.
func (c *Config) SourceError(name string, err error) error {
	var se *provider.SettingsError
	if !errors.As(err, &se) {
		return err
	}
	return &Error{File: c.fileName(), Line: c.Line("sources." + name + "." + se.Key), Key: "sources." + name + "." + se.Key, Msg: se.Msg, Err: err}
}

func (c *Config) validateDestination(name string, d *Destination) error {
	k := "destinations." + name
	if err := checkName(c, k, name); err != nil {
		return err
	}
	if d == nil {
		return c.Errorf(k, "must be a mapping with at least url and sources")
	}
	var p problems
	p.add(c.validateKind(k, d))
	if d.Type != TypeHTTP {
		// The kind's block holds where messages go (validateKind).
	} else if d.URL == "" {
		p.add(c.Errorf(k+".url", "required"))
	} else if err := checkHTTPURL(d.URL); err != nil {
		p.add(c.Errorf(k+".url", "%s", err))
	} else if src, ok := c.ownSource(d.URL); ok {
		why := "each delivery arrives as an event of " + src
		if slices.Contains(d.Sources, src) {
			why += ", which this destination delivers again: a loop that records events without end"
		}
		c.warnf(k+".url", "points at this gateway's own /webhooks/%s (listen: %s): %s", src, c.Listen, why)
	}
	sourcesOK := len(d.Sources) > 0
	if !sourcesOK {
		p.add(c.Errorf(k+".sources", "required: the sources whose events go to %s", name))
	}
	for i, src := range d.Sources {
		ik := fmt.Sprintf("%s.sources[%d]", k, i)
		if _, ok := c.Sources[src]; !ok {
			msg := fmt.Sprintf("unknown source %q", src)
			if s := cli.Suggest(src, c.SourceOrder); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			}
			p.add(c.Errorf(ik, "%s", msg))
			sourcesOK = false
		} else if slices.Index(d.Sources, src) < i {
			p.add(c.Errorf(ik, "source %q is listed twice", src))
		}
	}
	if d.SigningSecret != "" {
		// Standard Webhooks keys are 24 to 64 bytes: shorter is guessable,
		// and receivers' libraries may refuse either.
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(d.SigningSecret, "whsec_"))
		if err != nil || len(b) < 24 || len(b) > 64 {
			p.add(c.Errorf(k+".signing_secret", "must be a Standard Webhooks secret: whsec_ followed by the base64 of 24 to 64 random bytes, e.g. whsec_$(openssl rand -base64 32)"))
		}
	}
	if d.Timeout <= 0 {
		p.add(c.Errorf(k+".timeout", "must be greater than 0"))
	}
	if d.MaxAttempts < 1 {
		p.add(c.Errorf(k+".max_attempts", "must be at least 1, not %d", d.MaxAttempts))
	}
	switch {
	case d.Backoff.Initial <= 0:
		p.add(c.Errorf(k+".backoff.initial", "must be greater than 0"))
	case d.Backoff.Max <= 0:
		p.add(c.Errorf(k+".backoff.max", "must be greater than 0"))
	case d.Backoff.Initial > d.Backoff.Max:
		p.add(c.Errorf(k+".backoff", "initial (%s) is greater than max (%s)", d.Backoff.Initial, d.Backoff.Max))
	}
	switch anyhook.StalePolicy(d.OnStaleClaim) {
	case anyhook.Reclaim, anyhook.Hold:
		d.StalePolicy = anyhook.StalePolicy(d.OnStaleClaim)
	default:
		p.add(c.Errorf(k+".on_stale_claim", "must be reclaim or hold, not %q", d.OnStaleClaim))
	}
	for i, h := range d.DropHeaders {
		if !headerRe.MatchString(h) {
			p.add(c.Errorf(fmt.Sprintf("%s.drop_headers[%d]", k, i), "%q is not a valid header name", h))
		}
	}
	if d.MaxInFlight < 1 {
		p.add(c.Errorf(k+".max_in_flight", "must be at least 1, not %d", d.MaxInFlight))
	}
	if c.has(k+".filter") && strings.TrimSpace(d.Filter) == "" {
		p.add(c.Errorf(k+".filter", "is empty; remove the key to deliver every event of the sources"))
	} else if d.Filter != "" {
		// Compiled here only to be checked: the wiring compiles it again
		// (gateway.Filters), and the config holds plain data.
		if _, err := route.Compile(d.Filter); err != nil {
			p.add(c.Errorf(k+".filter", "%s", err))
		}
	}
	if sourcesOK {
		p.add(c.validateOrder(k, d))
	}
	if d.AutoPause != nil || c.has(k+".auto_pause") {
		p.add(c.validateAutoPause(k+".auto_pause", d.AutoPause))
	}
	p.add(c.validateOutbound(k, d))
	return p.err()
}

// validateKind checks a destination's type and its block: each kind has
// its own (nats, rabbitmq, kafka), a block of another kind is a mistake,
// and url is http's alone.
func (c *Config) validateKind(k string, d *Destination) error {
	var p problems
	blocks := []struct {
		kind string
		set  bool
	}{{TypeNATS, d.NATS != nil || c.has(k+".nats")}, {TypeRabbitMQ, d.RabbitMQ != nil || c.has(k+".rabbitmq")}, {TypeKafka, d.Kafka != nil || c.has(k+".kafka")}}
	switch d.Type {
	case TypeHTTP, TypeNATS, TypeRabbitMQ, TypeKafka, TypePull:
	default:
		return c.Errorf(k+".type", "must be http, nats, rabbitmq, kafka or pull, not %q", d.Type)
	}
	for _, b := range blocks {
		if b.set && b.kind != d.Type {
			p.add(c.Errorf(k+"."+b.kind, "is for type: %s, and this destination is type: %s: remove the block or set type: %s", b.kind, d.Type, b.kind))
		}
	}
	switch {
	case d.Type == TypePull && (d.URL != "" || c.has(k+".url")):
		p.add(c.Errorf(k+".url", "is for type: http; a pull destination is not called: its consumers lease its deliveries (docs/pull.md)"))
	case d.Type != TypeHTTP && (d.URL != "" || c.has(k+".url")):
		p.add(c.Errorf(k+".url", "is for type: http; a %s destination's broker is %s.%s", d.Type, k, map[string]string{TypeNATS: "nats.url", TypeRabbitMQ: "rabbitmq.url", TypeKafka: "kafka.brokers"}[d.Type]))
	}
	if d.Type == TypePull {
		if d.AutoPause != nil || c.has(k+".auto_pause") {
			p.add(c.Errorf(k+".auto_pause", "is not for type: pull: nothing is sent, so nothing fails to pause for"))
		}
		if m := d.MaxAge.D(); m != 0 && (m < MinPullMaxAge || m > MaxPullMaxAge) {
			p.add(c.Errorf(k+".max_age", "must be between %s and %s, not %s", MinPullMaxAge, "366d", m))
		}
		if a := d.AlertBacklogAfter.D(); a < time.Second || a > MaxPullMaxAge {
			p.add(c.Errorf(k+".alert_backlog_after", "must be between 1s and 366d, not %s", a))
		}
	} else {
		if d.MaxAge != 0 {
			p.add(c.Errorf(k+".max_age", "is for type: pull (how long its deliveries wait for a consumer)"))
		}
		if d.AlertBacklogAfter != 0 {
			p.add(c.Errorf(k+".alert_backlog_after", "is for type: pull (when its waiting deliveries raise an alert)"))
		}
	}
	if d.Type != TypeHTTP && d.TLSInsecureSkipVerify {
		p.add(c.Errorf(k+".tls_insecure_skip_verify", "is for type: http"))
	}
	if d.Type != TypeHTTP {
		// How an HTTP request is made: nothing else reads them, and a
		// credential accepted and then ignored would mislead.
		for _, key := range []string{"headers", "auth", "tls", "proxy"} {
			if c.has(k + "." + key) {
				p.add(c.Errorf(k+"."+key, "is for type: http; a %s destination does not use it", d.Type))
			}
		}
	}
	switch d.Type {
	case TypeNATS:
		n := d.NATS
		if n == nil {
			p.add(c.Errorf(k+".nats", "required for type: nats: url, subject and stream"))
			break
		}
		p.add(checkBrokerURL(c, k+".nats.url", n.URL, "nats", "tls"))
		switch {
		case n.Subject == "":
			p.add(c.Errorf(k+".nats.subject", "required: the subject each delivery is published to"))
		case strings.ContainsAny(n.Subject, "*> \t\r\n") || strings.HasPrefix(n.Subject, ".") || strings.HasSuffix(n.Subject, ".") || strings.Contains(n.Subject, ".."):
			p.add(c.Errorf(k+".nats.subject", "must be a subject without wildcards (* >), white space or empty tokens, not %q", n.Subject))
		}
		switch {
		case n.Stream == "":
			p.add(c.Errorf(k+".nats.stream", "required: the JetStream stream that stores the subject (its duplicate window dedupes re-sends)"))
		case strings.ContainsAny(n.Stream, ".*> \t\r\n/\\"):
			p.add(c.Errorf(k+".nats.stream", "%q is not a stream name (no . * > / \\ or white space)", n.Stream))
		}
	case TypeRabbitMQ:
		r := d.RabbitMQ
		if r == nil {
			p.add(c.Errorf(k+".rabbitmq", "required for type: rabbitmq: url, and exchange or routing_key"))
			break
		}
		if strings.Contains(r.URL, ",") {
			// amqp091 dials one URL: the rest would be the vhost, and the
			// broker's refusal would quote it, a password included.
			p.add(c.Errorf(k+".rabbitmq.url", "must be one amqp:// or amqps:// URL, not a list"))
		} else {
			p.add(checkBrokerURL(c, k+".rabbitmq.url", r.URL, "amqp", "amqps"))
		}
		if r.Exchange == "" && r.RoutingKey == "" {
			p.add(c.Errorf(k+".rabbitmq.routing_key", "required with the default exchange (exchange unset): the queue each delivery goes to"))
		}
	case TypeKafka:
		kf := d.Kafka
		if kf == nil {
			p.add(c.Errorf(k+".kafka", "required for type: kafka: brokers and topic"))
			break
		}
		if len(kf.Brokers) == 0 {
			p.add(c.Errorf(k+".kafka.brokers", "required: host:port of one or more brokers"))
		}
		for i, b := range kf.Brokers {
			if host, port, err := net.SplitHostPort(b); err != nil || host == "" || port == "" {
				p.add(c.Errorf(fmt.Sprintf("%s.kafka.brokers[%d]", k, i), "must be host:port, not %q", b))
			}
		}
		switch {
		case kf.Topic == "":
			p.add(c.Errorf(k+".kafka.topic", "required: the topic each delivery is produced to"))
		case !kafkaTopicRe.MatchString(kf.Topic):
			p.add(c.Errorf(k+".kafka.topic", "%q is not a Kafka topic name: 1 to 249 of a-z A-Z 0-9 . _ -", kf.Topic))
		}
	}
	return p.err()
}

var kafkaTopicRe = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// checkBrokerURL checks a broker's URL (or comma-separated URLs) against
// its schemes. Its message never quotes the URL: it may hold a password.
func checkBrokerURL(c *Config, key, s string, schemes ...string) error {
	if s == "" {
		return c.Errorf(key, "required: %s://host:port", schemes[0])
	}
	for _, one := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "" {
			return c.Errorf(key, "must be a %s:// URL with a host", strings.Join(schemes, ":// or "))
		}
	}
	return nil
}

// validateAutoPause checks a destination's breaker: exactly one rule,
// each number within its bounds.
func (c *Config) validateAutoPause(k string, ap *AutoPause) error {
	if ap == nil {
		return c.Errorf(k, "must be a mapping: consecutive_failures: N, or failure_rate: R with window: N")
	}
	var p problems
	// By value, not by key: the effective config (anyhook config) prints
	// the other rule's numbers as 0.
	consecutive := ap.ConsecutiveFailures != 0
	rate := ap.FailureRate != 0 || ap.Window != 0
	switch {
	case consecutive && rate:
		p.add(c.Errorf(k, "has both consecutive_failures and failure_rate/window: choose one rule"))
	case !consecutive && !rate:
		p.add(c.Errorf(k, "needs a rule: consecutive_failures: N, or failure_rate: R with window: N"))
	case consecutive:
		if n := ap.ConsecutiveFailures; n < MinConsecutiveFailures || n > MaxBreakerCount {
			p.add(c.Errorf(k+".consecutive_failures", "must be from %d to %d, not %d", MinConsecutiveFailures, MaxBreakerCount, n))
		}
	default:
		if r := ap.FailureRate; !(r > 0 && r <= 1) {
			p.add(c.Errorf(k+".failure_rate", "must be above 0 and at most 1 (a share of the window's attempts), not %v", r))
		}
		if n := ap.Window; n == 0 {
			p.add(c.Errorf(k+".window", "required with failure_rate: how many of the latest attempts it is judged over, from %d to %d (window: 100)", MinBreakerWindow, MaxBreakerCount))
		} else if n < MinBreakerWindow || n > MaxBreakerCount {
			p.add(c.Errorf(k+".window", "must be from %d to %d attempts, not %d", MinBreakerWindow, MaxBreakerCount, n))
		}
	}
	if ap.ProbeEvery < Duration(MinProbeEvery) || ap.ProbeEvery > Duration(MaxProbeEvery) {
		p.add(c.Errorf(k+".probe_every", "must be from %s to %s, not %s", MinProbeEvery, MaxProbeEvery, ap.ProbeEvery))
	}
	return p.err()
}

// validateOrder checks a destination's order: per_object needs ordering
// rules (the object and version of each event) on every source it lists.
func (c *Config) validateOrder(k string, d *Destination) error {
	switch d.Order {
	case "":
		if c.has(k + ".order") {
			return c.Errorf(k+".order", "is empty; remove the key to deliver without order, or set per_object")
		}
		return nil
	case OrderPerObject:
	default:
		return c.Errorf(k+".order", "must be per_object, not %q", d.Order)
	}
	for _, name := range d.Sources {
		if !provider.Ordered(c.Sources[name].ProviderSettings()) {
			return c.Errorf(k+".order", "per_object needs ordering rules on every source, and source %q (provider %s) has none: set sources.%s.ordering.object and .version", name, c.Sources[name].Provider, name)
		}
	}
	return nil
}

func (c *Config) validateAlert(k string, a Alert) error {
	set := 0
	for _, on := range []bool{a.Webhook != "", a.Slack != "", a.PagerDuty != nil} {
		if on {
			set++
		}
	}
	if set != 1 {
		return c.Errorf(k, "each alert sets exactly one of webhook, slack or pagerduty (found %d)", set)
	}
	switch {
	case a.Webhook != "":
		if err := checkHTTPURL(a.Webhook); err != nil {
			return c.Errorf(k+".webhook", "%s", err)
		}
	case a.Slack != "":
		if err := overTLS(a.Slack, "the URL itself is the credential"); err != nil {
			return c.Errorf(k+".slack", "%s", err)
		}
	default:
		if a.PagerDuty.RoutingKey == "" {
			return c.Errorf(k+".pagerduty.routing_key", "required")
		}
		if err := overTLS(a.PagerDuty.URL, "the routing_key is sent to it"); err != nil {
			return c.Errorf(k+".pagerduty.url", "%s", err)
		}
	}
	return nil
}

func (c *Config) validateDelivery() error {
	if c.Delivery.PollInterval <= 0 {
		return c.Errorf("delivery.poll_interval", "must be greater than 0")
	}
	if c.Delivery.Grace <= 0 || c.Delivery.Grace.D() > MaxGrace {
		return c.Errorf("delivery.grace", "must be greater than 0 and at most %s, not %s", MaxGrace, c.Delivery.Grace)
	}
	if c.Delivery.Shutdown < 0 {
		return c.Errorf("delivery.shutdown", "must not be negative")
	}
	if w := c.Ingest.MaxQueueWait; w < 0 || w.D() > MaxMaxQueueWait {
		return c.Errorf("ingest.max_queue_wait", "must be between 0 (never shed) and %s, not %s", MaxMaxQueueWait, w)
	}
	return nil
}

func (c *Config) validateIncidents() error {
	var p problems
	in := c.Incidents
	if in.ResolveAfter.D() < time.Second {
		p.add(c.Errorf("incidents.resolve_after", "must be at least 1s, not %s", in.ResolveAfter))
	}
	if in.ReopenWithin < 0 {
		p.add(c.Errorf("incidents.reopen_within", "must not be negative (0s: never reopen)"))
	}
	if in.EscalateEvents < 0 {
		p.add(c.Errorf("incidents.escalate_events", "must not be negative (0: never by events), not %d", in.EscalateEvents))
	}
	if in.EscalateAfter < 0 {
		p.add(c.Errorf("incidents.escalate_after", "must not be negative (0s: never by time)"))
	}
	// A resolved incident must outlive the window it can reopen in, or a
	// failure in it would open a new one beside the deleted one.
	if r := in.Retention; r < 0 || (r > 0 && (r.D() < 24*time.Hour || r <= in.ReopenWithin)) {
		p.add(c.Errorf("incidents.retention", "must be 0s (keep resolved incidents for ever) or at least 24h and longer than incidents.reopen_within (%s), not %s", in.ReopenWithin, r))
	}
	return p.err()
}

func checkName(c *Config, key, name string) error {
	if !nameRe.MatchString(name) || name == "." || name == ".." {
		return c.Errorf(key, "invalid name %q: use letters, digits, '_', '-' and '.'", name)
	}
	if len(name) > maxName {
		return c.Errorf(key, "name of %d characters: at most %d", len(name), maxName)
	}
	return nil
}

// maxName bounds source and destination names. Each is indexed in
// PostgreSQL before a key of up to 1 KiB (store.MaxDedupKey, MaxObject), in
// a btree row of at most 2,704 bytes: a name of some kilobytes would make
// PostgreSQL refuse every event that SQLite takes.
const maxName = 200

// checkHTTPURL accepts absolute http and https URLs with a host. Its
// message never quotes the URL: Slack webhook URLs are secrets.
func checkHTTPURL(s string) error {
	if !strings.Contains(s, "://") {
		// 127.0.0.1:9000/hooks, localhost:9000, hooks.example.com/x.
		if u, err := url.Parse("http://" + s); err == nil && u.Host != "" && !strings.HasPrefix(s, "/") {
			return fmt.Errorf("must be an absolute http:// or https:// URL, and this one has no scheme: write http:// (or https://) in front of the host")
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("must be an absolute http:// or https:// URL")
	}
	if u.Host == "" {
		return fmt.Errorf("URL has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("URL's port %s is not a port: 1 to 65535", p)
		}
	}
	return nil
}

// checkAPIBase checks a provider API root: the api_key goes to it, so it
// is https://, or http:// to a loopback host (a test server, or a proxy on
// the same machine that adds TLS). It holds no credentials of its own (a
// user name in a URL is kept by net/http's errors, which reach the admin
// API and the dashboard; the key belongs in api_key), and no query or
// fragment (the API's paths are appended to it).
func checkAPIBase(s string) error {
	if err := checkHTTPURL(s); err != nil {
		return err
	}
	u, _ := url.Parse(s)
	switch {
	case u.User != nil:
		return fmt.Errorf("must not hold a user name or password (the key goes in api_key); remove the part before @")
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("must not have a query (the API's paths and queries are added to it)")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("must not have a fragment (#…)")
	}
	return overTLS(s, "the api_key is sent to it")
}

// overTLS checks an http(s) URL that a credential goes to (why says
// which): it is https://, or http:// to a loopback host, so the
// credential never crosses a network in the clear.
func overTLS(s, why string) error {
	if err := checkHTTPURL(s); err != nil {
		return err
	}
	u, _ := url.Parse(s)
	if u.Scheme == "https" || isLoopback(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("must be https:// (%s); http:// is allowed only to a loopback host (localhost, 127.0.0.1, ::1), not %s", why, u.Hostname())
}

// SQLitePath returns the SQLite database file, resolved against the config
// file's directory, and whether the database is SQLite at all.
func (c *Config) SQLitePath() (string, bool) {
	p, ok := strings.CutPrefix(c.Database, "sqlite:")
	if !ok {
		return "", false
	}
	if p == ":memory:" || strings.HasPrefix(p, "file:") || filepath.IsAbs(p) {
		return p, true
	}
	return filepath.Join(c.Dir, p), true
}

// PostgresURL returns the PostgreSQL connection URL, and whether the
// database is PostgreSQL at all.
func (c *Config) PostgresURL() (string, bool) {
	if strings.HasPrefix(c.Database, "postgres://") || strings.HasPrefix(c.Database, "postgresql://") {
		return c.Database, true
	}
	return "", false
}
