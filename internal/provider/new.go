package provider

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/config"
)

// kind is one provider's constructor, signer and event-type reader.
type kind struct {
	build func(src *config.Source, keys [][]byte, tol time.Duration) (Provider, error)
	sign  func(secret string, r *Request, now time.Time) error
	// typeOf reads the event type of a verified request; body is the
	// item's own bytes for a batch item, else the request body. nil: the
	// provider's events carry no type (a source's type: rule may set one).
	typeOf func(r *Request, body []byte) string
}

// kinds is the fixed table of providers, by config name.
var kinds = map[string]kind{
	"generic":  {buildGeneric, nil, nil},
	"github":   {buildGitHub, signGitHub, typeOfGitHub},
	"gitlab":   {buildGitLab, signGitLab, typeOfGitLab},
	"hubspot":  {buildHubSpot, signHubSpot, typeOfHubSpot},
	"paddle":   {buildPaddle, signPaddle, typeOfPaddle},
	"shopify":  {buildShopify, signShopify, typeOfShopify},
	"slack":    {buildSlack, signSlack, typeOfSlack},
	"square":   {buildSquare, signSquare, typeOfSquare},
	"standard": {buildStandard, signStandard, typeOfStandard},
	"stripe":   {buildStripe, signStripe, typeOfStripe},
	"twilio":   {buildTwilio, signTwilio, nil},
}

// Names returns the known provider names, sorted.
func Names() []string {
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// New builds the Provider of a configured source. Its errors start with
// the offending key relative to the source ("secrets: …", "signature: …"),
// so a caller can prefix "file:line: sources.NAME.".
//
// A source's id and ordering rules, when set, override the provider's own
// dedup key and ordering hints.
func New(src *config.Source) (Provider, error) {
	if src.Provider == "" {
		return nil, fmt.Errorf("provider: required (known: %s)", strings.Join(Names(), ", "))
	}
	k, ok := kinds[src.Provider]
	if !ok {
		return nil, fmt.Errorf("provider: unknown provider %q (known: %s)", src.Provider, strings.Join(Names(), ", "))
	}
	tol := src.Tolerance.D()
	switch {
	case tol < 0:
		return nil, errors.New("tolerance: must not be negative")
	case tol == 0:
		tol = DefaultTolerance
	}
	if src.Provider == "generic" && src.Signature == nil {
		return nil, errGenericSignature
	}
	unsigned := src.Provider == "generic" && src.Signature.None
	if len(src.Secrets) == 0 && !unsigned {
		return nil, errors.New("secrets: at least one secret is required")
	}
	keys := make([][]byte, len(src.Secrets))
	for i, s := range src.Secrets {
		if s == "" {
			return nil, fmt.Errorf("secrets[%d]: empty secret", i)
		}
		keys[i] = []byte(s)
	}
	p, err := k.build(src, keys, tol)
	if err != nil {
		return nil, err
	}
	p = typed(p, k.typeOf)
	var o overrides
	if src.Type != "" {
		if o.typ, err = ParseField(src.Type); err != nil {
			return nil, fmt.Errorf("type: %w", err)
		}
	}
	if src.ID != "" {
		if o.id, err = ParseField(src.ID); err != nil {
			return nil, fmt.Errorf("id: %w", err)
		}
	}
	if src.Ordering != nil {
		if src.Ordering.Object != "" {
			if o.object, err = ParseField(src.Ordering.Object); err != nil {
				return nil, fmt.Errorf("ordering.object: %w", err)
			}
		}
		if src.Ordering.Version != "" {
			if o.version, err = ParseField(src.Ordering.Version); err != nil {
				return nil, fmt.Errorf("ordering.version: %w", err)
			}
		}
	}
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
		if reqKey != "" && e.ContentKey == "" {
			e.ContentKey = reqKey
			if e.Body != nil {
				e.ContentKey = contentKey("item", []byte(reqKey), e.Body)
			}
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

// CredentialHeaders lists the request headers of a provider that carry the
// source's secret itself (GitLab's X-Gitlab-Token, a plain shared token):
// they are checked, then neither stored, shown nor forwarded.
func CredentialHeaders(providerName string) []string {
	if providerName == "gitlab" {
		return []string{"X-Gitlab-Token"}
	}
	return nil
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
	case r.URL == "" && (providerName == "twilio" || providerName == "hubspot" || providerName == "square"):
		return fmt.Errorf("provider %s signs the URL: set Request.URL", providerName)
	}
	ensureHeader(r)
	return k.sign(secret, r, now)
}
