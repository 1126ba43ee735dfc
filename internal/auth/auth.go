// Package auth resolves the tokens presented to the admin API, the
// dashboard and /metrics to a principal (a token's name and scopes), and
// says what each scope may do. It is the one place tokens are compared:
// in constant time, against every configured token, so that the time an
// answer takes does not say which token, if any, matched.
//
// Scopes:
//
//   - admin: everything.
//   - read: every GET of the admin API, /metrics, and the dashboard
//     without its actions.
//   - pull:DESTINATION: the pull endpoints of that destination, and
//     replays (marked as replays) of that destination's events and
//     deliveries; nothing else, and no dashboard login.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
)

// Scopes.
const (
	ScopeAdmin = "admin"
	ScopeRead  = "read"
	// PullPrefix starts a pull scope: "pull:" + a destination's name.
	PullPrefix = "pull:"
)

// MinTokenLength is the fewest characters a named token may have: what
// stops guessing is a token's length, not the failure counter.
const MinTokenLength = 16

// AdminTokenName is the name under which the config's admin_token is
// known, and recorded as the actor of what it does.
const AdminTokenName = "admin"

// Token is one configured token.
type Token struct {
	Name   string
	Secret string // the token itself; never logged or shown
	Scopes []string
}

// Principal is who presented a token: its name and scopes. The zero
// Principal may do nothing.
type Principal struct {
	Name   string
	Scopes []string
}

// Anonymous is the principal of every request when no token is
// configured (a loopback listener, which the caller enforces): it may do
// everything, as the admin token may, and has no name.
var Anonymous = Principal{Scopes: []string{ScopeAdmin}}

// Has reports whether p has scope.
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }

// Admin reports whether p may do everything.
func (p Principal) Admin() bool { return p.Has(ScopeAdmin) }

// CanRead reports whether p may read the admin API, the dashboard's pages
// and /metrics.
func (p Principal) CanRead() bool { return p.Admin() || p.Has(ScopeRead) }

// CanLogin reports whether p may log in to the dashboard.
func (p Principal) CanLogin() bool { return p.CanRead() }

// CanAct reports whether p may act: replay, resolve, pause, resume,
// acknowledge, backfill, save a search, discard …
func (p Principal) CanAct() bool { return p.Admin() }

// Pulls are the destinations p has a pull scope for.
func (p Principal) Pulls() []string {
	var out []string
	for _, s := range p.Scopes {
		if d, ok := strings.CutPrefix(s, PullPrefix); ok {
			out = append(out, d)
		}
	}
	return out
}

// CanPull reports whether p may lease, ack, nack and extend deliveries of
// destination: an admin, or a token with pull:destination.
func (p Principal) CanPull(destination string) bool {
	return p.Admin() || destination != "" && p.Has(PullPrefix+destination)
}

// CanReplay reports whether p may replay into destination ("" means
// every destination the replay would pick, which only an admin may).
func (p Principal) CanReplay(destination string) bool {
	return p.Admin() || destination != "" && p.Has(PullPrefix+destination)
}

// Describe says what p is, for a refusal's message: its name and scopes,
// never its token.
func (p Principal) Describe() string {
	return "token " + quote(p.Name) + " (scopes: " + strings.Join(p.Scopes, ", ") + ")"
}

func quote(s string) string { return `"` + s + `"` }

// entry is a configured token as Tokens keeps it.
type entry struct {
	sum    [sha256.Size]byte // of the secret: compared in constant time at a fixed length
	secret []byte            // for the keys derived from it (Key)
	p      Principal
}

// Tokens are the configured tokens. The zero value and nil have none:
// authentication is off.
type Tokens struct {
	entries []entry
}

// New returns the tokens ts. The config has checked them: names and
// secrets unique and not empty.
func New(ts []Token) *Tokens {
	t := &Tokens{}
	for _, x := range ts {
		// White space around a configured token (a secret file's final
		// newline) is ignored, as around a presented one: kept, the token
		// could never match.
		secret := strings.TrimSpace(x.Secret)
		t.entries = append(t.entries, entry{
			sum:    sha256.Sum256([]byte(secret)),
			secret: []byte(secret),
			p:      Principal{Name: x.Name, Scopes: slices.Clone(x.Scopes)},
		})
	}
	return t
}

// Off reports whether no token is configured: every request is
// Anonymous.
func (t *Tokens) Off() bool { return t == nil || len(t.entries) == 0 }

// Resolve returns the principal of presented, a token as a client sent
// it (white space around it ignored). It compares presented with every
// configured token, whichever matched, so that its time says nothing of
// which one did.
func (t *Tokens) Resolve(presented string) (Principal, bool) {
	if t.Off() {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(presented)))
	match := -1
	for i := range t.entries {
		eq := subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return Principal{}, false
	}
	return t.entries[match].p, true
}

// Lookup returns the principal of the token named name.
func (t *Tokens) Lookup(name string) (Principal, bool) {
	if t == nil {
		return Principal{}, false
	}
	for _, e := range t.entries {
		if e.p.Name == name {
			return e.p, true
		}
	}
	return Principal{}, false
}

// Key derives a key for purpose from the token named name:
// HMAC-SHA256(token, purpose). The dashboard signs its sessions with it,
// so that changing or removing a token ends the sessions it opened.
func (t *Tokens) Key(name, purpose string) ([]byte, bool) {
	if t == nil {
		return nil, false
	}
	for _, e := range t.entries {
		if e.p.Name == name {
			mac := hmac.New(sha256.New, e.secret)
			mac.Write([]byte(purpose))
			return mac.Sum(nil), true
		}
	}
	return nil, false
}

// Bearer returns the token of r's "Authorization: Bearer …" header, and
// whether r has one.
func Bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p: the dashboard calls the admin API
// in-process on behalf of its session's principal. A request from the
// network cannot set it.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
