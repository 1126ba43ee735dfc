package provider

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// kind is one provider's constructor, signer and the facts about it that
// others need: the config (which settings it requires), ingest (which
// headers carry the secret itself) and the CLI (what Sign needs).
type kind struct {
	build func(s *Settings, keys [][]byte, tol time.Duration) (Provider, error)
	sign  func(secret string, r *Request, now time.Time) error
	// urlBound: the signature covers the URL the provider called, so the
	// source needs its public URL (never rebuilt from Host or
	// X-Forwarded-*: a request signed for another deployment must not
	// verify here).
	urlBound bool
	// credentials are the request headers that carry the source's secret
	// itself (a plain shared token): checked, then neither stored, shown
	// nor forwarded.
	credentials []string
	// ordered: the provider derives its own ordering hints, so a source
	// may set ordering.stale alone.
	ordered bool
	// typeOf reads the event type of a verified request; body is the
	// item's own bytes for a batch item, else the request body. nil: the
	// provider's events carry no type (a source's type rule may set one).
	typeOf func(r *Request, body []byte) string
	// ids are where a request names itself without a secret: what the
	// rejection log may keep of a refused one (Identifier).
	ids []idSpec
	// retries: the provider sends a request again by itself after a 503
	// (docs/operations.md, "Overload", says how often and for how long),
	// so a gateway over capacity may shed it.
	retries bool
}

// kinds is the fixed table of providers, by config name.
var kinds = map[string]kind{
	"generic": {build: buildGeneric},
	"github": {build: buildGitHub, sign: signGitHub, ordered: true, typeOf: typeOfGitHub,
		ids: headerIDs("X-GitHub-Delivery", "X-GitHub-Hook-ID")},
	"gitlab": {build: buildGitLab, sign: signGitLab, ordered: true, credentials: []string{"X-Gitlab-Token"}, typeOf: typeOfGitLab,
		ids: headerIDs("Idempotency-Key", "X-Gitlab-Event-UUID", "webhook-id", "webhook-timestamp")},
	"hubspot": {retries: true, build: buildHubSpot, sign: signHubSpot, ordered: true, urlBound: true, typeOf: typeOfHubSpot,
		ids: headerIDs("X-HubSpot-Request-Timestamp")},
	"paddle": {retries: true, build: buildPaddle, sign: signPaddle, ordered: true, typeOf: typeOfPaddle,
		ids: []idSpec{{header: "Paddle-Signature", param: "ts", sep: ";"}, {path: []string{"event_id"}}}},
	"shopify": {retries: true, build: buildShopify, sign: signShopify, ordered: true, typeOf: typeOfShopify,
		ids: headerIDs("X-Shopify-Event-Id", "Shopify-Event-Id", "X-Shopify-Webhook-Id", "Shopify-Webhook-Id")},
	"slack": {retries: true, build: buildSlack, sign: signSlack, ordered: true, typeOf: typeOfSlack,
		ids: append(headerIDs("X-Slack-Request-Timestamp"), idSpec{path: []string{"event_id"}})},
	"square": {retries: true, build: buildSquare, sign: signSquare, ordered: true, urlBound: true, typeOf: typeOfSquare,
		ids: []idSpec{{path: []string{"event_id"}}}},
	"standard": {retries: true, build: buildStandard, sign: signStandard, ordered: true, typeOf: typeOfStandard,
		ids: headerIDs("webhook-id", "webhook-timestamp", "svix-id", "svix-timestamp")},
	"stripe": {retries: true, build: buildStripe, sign: signStripe, ordered: true, typeOf: typeOfStripe,
		ids: []idSpec{{header: "Stripe-Signature", param: "t", sep: ","}, {path: []string{"id"}}}},
	"twilio": {build: buildTwilio, sign: signTwilio, ordered: true, urlBound: true,
		ids: headerIDs("I-Twilio-Idempotency-Token")},
}

// Retries reports whether the provider sends a request again by itself
// after a 503 (GitHub, GitLab and Twilio do not by default; a generic
// source's sender is unknown).
func Retries(providerName string) bool { return kinds[providerName].retries }

// Names returns the known provider names, sorted.
func Names() []string {
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CredentialHeaders lists the request headers of a provider that carry the
// source's secret itself (GitLab's X-Gitlab-Token, a plain shared token):
// they are checked, then neither stored, shown nor forwarded.
func CredentialHeaders(providerName string) []string {
	return slices.Clone(kinds[providerName].credentials)
}

// Ordered reports whether the events of a source with settings s carry
// an object and a version: the provider derives them itself, or the
// source's ordering rule names both fields.
func Ordered(s Settings) bool {
	o := s.Ordering
	return kinds[s.Provider].ordered || (o != nil && o.Object != "" && o.Version != "")
}

// Validate checks s as a config gives a source's settings, defaults
// applied: a zero Tolerance is refused (New reads it as DefaultTolerance),
// a URL-bound provider needs PublicURL, and an ordering rule names both
// fields unless the provider orders events itself and it names neither.
// What a source needs to run is New's to check: a known provider, a
// generic source's signature, at least one secret and their form (a
// config file may be checked before its sources are complete). The error
// is a *SettingsError naming the setting.
func Validate(s Settings) error { return check(&s, true) }

// check is Validate; with strict unset it is what New asks of settings
// built in code: no PublicURL (the caller passes Request.URL) and an
// ordering override of one field (the other stays the provider's).
func check(s *Settings, strict bool) error {
	if s.Provider == "" {
		return errorf("provider", "required (known: %s)", strings.Join(Names(), ", "))
	}
	k, known := kinds[s.Provider]
	if strict && k.urlBound && s.PublicURL == "" {
		return errorf("public_url", "required for %s: its signature covers the URL the provider called, e.g. https://hooks.example.com/webhooks/SOURCE", s.Provider)
	}
	switch {
	case s.Tolerance < 0:
		return errorf("tolerance", "must not be negative")
	case s.Tolerance == 0:
		return errorf("tolerance", "must be greater than 0")
	}
	for i, secret := range s.Secrets {
		if secret == "" {
			return errorf(fmt.Sprintf("secrets[%d]", i), "empty secret (its value is empty: an unset variable?)")
		}
	}
	if sig := s.Signature; sig != nil && !sig.None {
		if _, err := genericScheme(*sig); err != nil {
			return err
		}
	}
	if _, err := s.overrides(strict && known && !k.ordered); err != nil {
		return err
	}
	if strict && s.Ordering != nil && (s.Ordering.Object == "") != (s.Ordering.Version == "") {
		if s.Ordering.Object == "" {
			return errorf("ordering.object", "required: header:NAME or json:PATH")
		}
		return errorf("ordering.version", "required: header:NAME or json:PATH")
	}
	return nil
}

// overrides parses the source's id and ordering rules. With both set, the
// ordering rule names both fields (the provider has no ordering of its
// own to fall back on).
func (s *Settings) overrides(both bool) (overrides, error) {
	var o overrides
	var err error
	if s.ID != "" {
		if o.id, err = ParseField(s.ID); err != nil {
			return o, errorf("id", "%s", err)
		}
	}
	if s.Type != "" {
		if o.typ, err = ParseField(s.Type); err != nil {
			return o, errorf("type", "%s", err)
		}
	}
	if s.Ordering == nil {
		return o, nil
	}
	for _, f := range []struct {
		key, spec string
		dst       *Field
	}{{"ordering.object", s.Ordering.Object, &o.object}, {"ordering.version", s.Ordering.Version, &o.version}} {
		switch {
		case f.spec == "" && both:
			return o, errorf(f.key, "required: header:NAME or json:PATH")
		case f.spec == "":
		default:
			if *f.dst, err = ParseField(f.spec); err != nil {
				return o, errorf(f.key, "%s", err)
			}
		}
	}
	return o, nil
}

// New builds the Provider of a source's settings. Its errors are
// *SettingsError, keyed relative to the source ("secrets[1]",
// "signature"), so a caller can locate them in its own terms (config adds
// file, key and line).
//
// A source's id and ordering rules, when set, override the provider's own
// dedup key and ordering hints.
func New(s Settings) (Provider, error) {
	if s.Tolerance == 0 {
		s.Tolerance = DefaultTolerance
	}
	if err := check(&s, false); err != nil {
		return nil, err
	}
	k, ok := kinds[s.Provider]
	switch {
	case !ok:
		return nil, errorf("provider", "unknown provider %q (known: %s)", s.Provider, strings.Join(Names(), ", "))
	case s.Provider == "generic" && s.Signature == nil:
		return nil, errorf("signature", `required for generic sources; say "signature: none" to accept unsigned requests`)
	case len(s.Secrets) == 0 && (s.Provider != "generic" || !s.Signature.None):
		return nil, errorf("secrets", "at least one secret is required")
	}
	keys := make([][]byte, len(s.Secrets))
	for i, secret := range s.Secrets {
		keys[i] = []byte(secret)
	}
	p, err := k.build(&s, keys, s.Tolerance)
	if err != nil {
		return nil, err
	}
	p = typed(p, k.typeOf)
	o, _ := s.overrides(false) // checked above
	if o.id.IsZero() && o.object.IsZero() && o.version.IsZero() && o.typ.IsZero() {
		return p, nil
	}
	o.Provider = p
	return &o, nil
}

// overrides applies a source's configured id and ordering extractors on top
// of a provider's built-in ones, per event (per item for batches).
type overrides struct {
	Provider
	id, object, version, typ Field
}

// unsignedID reports whether the id rule reads a header that r's signature
// does not cover.
func (o *overrides) unsignedID(r *Request) bool {
	if o.id.header == "" {
		return false
	}
	hs, ok := o.Provider.(headerSigner)
	return !ok || !hs.signsHeader(r, o.id.header)
}

func (o *overrides) Extract(r *Request) (Extracted, error) {
	x, err := o.Provider.Extract(r)
	if err != nil || x.Challenge != nil {
		return x, err
	}
	// An id read from an unsigned header comes with a content key over
	// what the signature covers (per item for batches), so a resend with
	// a fresh header value is still a duplicate.
	var reqKey string
	if ck, ok := o.Provider.(contentKeyer); ok && o.unsignedID(r) {
		reqKey = ck.contentKey(r)
	}
	for i := range x.Events {
		e := &x.Events[i]
		body := e.Body
		if body == nil {
			body = r.Body
		}
		v := fields(r.Header, body, o.id, o.object, o.version, o.typ)
		if !o.id.IsZero() {
			e.DedupKey = v[0]
		}
		key := reqKey
		if key == "" && !o.id.IsZero() && v[0] == "" {
			// No id: a signed request is still keyed by what its
			// signature covers.
			if ck, ok := o.Provider.(contentKeyer); ok {
				key = ck.contentKey(r)
			}
		}
		if key != "" && e.ContentKey == "" {
			e.ContentKey = key
			if e.Body != nil {
				e.ContentKey = contentKey("item", []byte(key), e.Body)
			}
		}
		if !o.id.IsZero() && e.DedupKey == "" && e.ContentKey == "" {
			// An unsigned request without its id could be recorded only
			// with no dedup at all: every retry a new event.
			return Extracted{}, fail("missing id: %s is absent or empty (the source's id rule)", o.id)
		}
		if !o.object.IsZero() {
			e.Object = v[1]
		}
		if !o.version.IsZero() {
			e.Version = v[2]
		}
		if !o.typ.IsZero() {
			e.Type = v[3]
		}
		e.Object, e.Version = order(e.Object, e.Version)
	}
	return x, nil
}

// Sign sets on r.Header the signature headers (and timestamp headers) that
// the named provider would send for r, signed with secret at now. URL-bound
// schemes sign r.URL and r.Method; Twilio's JSON variant also appends
// bodySHA256 to r.URL, as Twilio does. For generic sources use SignGeneric.
func Sign(providerName, secret string, r *Request, now time.Time) error {
	k, ok := kinds[providerName]
	switch {
	case !ok:
		return fmt.Errorf("unknown provider %q (known: %s)", providerName, strings.Join(Names(), ", "))
	case k.sign == nil:
		return fmt.Errorf("provider %s: use SignGeneric with the source's signature scheme", providerName)
	case secret == "":
		return errors.New("empty secret")
	case r.URL == "" && k.urlBound:
		return fmt.Errorf("provider %s signs the URL: set Request.URL", providerName)
	}
	ensureHeader(r)
	return k.sign(secret, r, now)
}

// typed sets each event's type with the provider's own typeOf (per item
// for batches); a nil typeOf leaves p as is.
func typed(p Provider, typeOf func(r *Request, body []byte) string) Provider {
	if typeOf == nil {
		return p
	}
	return &typer{p, typeOf}
}

type typer struct {
	Provider
	typeOf func(r *Request, body []byte) string
}

func (t *typer) Extract(r *Request) (Extracted, error) {
	x, err := t.Provider.Extract(r)
	if err != nil || x.Challenge != nil {
		return x, err
	}
	for i := range x.Events {
		e := &x.Events[i]
		body := e.Body
		if body == nil {
			body = r.Body
		}
		e.Type = t.typeOf(r, body)
	}
	return x, nil
}

// contentKey and signsHeader pass through to the wrapped provider, so that
// overrides sees them.
func (t *typer) contentKey(r *Request) string {
	if ck, ok := t.Provider.(contentKeyer); ok {
		return ck.contentKey(r)
	}
	return ""
}

func (t *typer) signsHeader(r *Request, name string) bool {
	hs, ok := t.Provider.(headerSigner)
	return ok && hs.signsHeader(r, name)
}
