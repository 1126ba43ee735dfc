package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// redirectCases are redirect targets taken from a request (the login's
// next, an action's back) and the Location each must give: the usual
// open-redirect bypasses fall back to "/", dashboard paths keep their
// query.
var redirectCases = []struct{ next, want string }{
	// Off-site, however spelled.
	{"//evil.example", "/"},
	{`/\evil.example`, "/"},
	{`/\/evil.example`, "/"},
	{"%2F%2Fevil.example", "/"},
	{"/%5Cevil.example", "/"},
	{"%5C%5Cevil.example", "/"},
	{"/%2F/evil.example", "/"},
	{"/%2F%2Fevil.example", "/"},
	{`/./\evil.example/phish`, "/"},
	{`/../\evil.example`, "/"},
	{`/.\evil.example`, "/"},
	{"https://evil.example", "/"},
	{"https:/evil.example", "/"},
	{"HTTPS://evil.example/", "/"},
	{"javascript:alert(1)", "/"},
	{"/javascript:alert(1)", "/javascript:alert(1)"}, // a path, harmless
	{"//evil.example/%2e%2e", "/"},
	{"///evil.example", "/"},
	{"/\t/evil.example", "/"},
	{"/\n/evil.example", "/"},
	{"/%09/evil.example", "/"},
	{"/%0d%0aSet-Cookie:x=1", "/"},
	{" //evil.example", "/"},
	{`\/evil.example`, "/"},
	{`\\evil.example`, "/"},
	{"/events?q=%5C%5Cevil.example", "/"},
	{"/events?q=\\evil", "/"},
	{"evil.example", "/"},
	{"", "/"},
	{"/" + strings.Repeat("a", 5000), "/"},
	// Normalized to a path on this site.
	{"/.//evil.example", "/evil.example"},
	{"/events/../../evil.example", "/evil.example"},
	{"/%2e%2e/events", "/events"},
	{"/events#frag", "/events"},
	// Dashboard paths survive with their query.
	{"/", "/"},
	{"/events", "/events"},
	{"/events?source=stripe", "/events?source=stripe"},
	{"/events/0190f2a1-7c1e-7d2b-9a55-3f1f1b0c2d4e", "/events/0190f2a1-7c1e-7d2b-9a55-3f1f1b0c2d4e"},
	{"/deliveries?status=dead&destination=billing", "/deliveries?status=dead&destination=billing"},
	{"/events?q=evt%2F1&source=stripe", "/events?q=evt%2F1&source=stripe"},
	{"/events/a%20b", "/events/a%20b"},
}

// browserResolve resolves a Location against base the way a browser does
// for http(s) URLs: tabs and newlines dropped, "\" read as "/".
func browserResolve(t *testing.T, base, loc string) *url.URL {
	t.Helper()
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(strings.TrimSpace(loc))
	b, _ := url.Parse(base)
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatalf("Location %q: %v", loc, err)
	}
	return b.ResolveReference(u)
}

// short names a case in a failure message.
func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func checkLocation(t *testing.T, f *fixture, what string, r response, want string) {
	t.Helper()
	loc := r.header.Get("Location")
	if r.code != http.StatusSeeOther || loc != want {
		t.Errorf("%s: %d Location %q, want 303 %q", what, r.code, short(loc), want)
	}
	if u := browserResolve(t, f.srv.URL+"/login", loc); u.Host != strings.TrimPrefix(f.srv.URL, "http://") {
		t.Errorf("%s: Location %q leads a browser to %s", what, loc, u)
	}
}

func TestLoginRedirectStaysOnSite(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range redirectCases {
		// The login form carries next to the POST; both must be safe.
		r := f.get("/login?next=" + url.QueryEscape(tc.next))
		if !strings.Contains(r.body, `name="next" value="`) {
			t.Fatalf("login page without a next field:\n%s", r.body)
		}
		r = f.post("/login", url.Values{"token": {token}, "next": {tc.next}})
		checkLocation(t, f, "POST /login next="+short(tc.next), r, tc.want)
		// Logged in, the login page sends the person on at once.
		r = f.get("/login?next=" + url.QueryEscape(tc.next))
		checkLocation(t, f, "GET /login next="+short(tc.next), r, tc.want)
		f.post("/logout", nil)
	}
}

func TestActionRedirectStaysOnSite(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	for _, tc := range redirectCases {
		want := tc.want
		r := f.post("/destinations/billing/resume", url.Values{"back": {tc.next}})
		if tc.next == "" {
			want = "/destinations" // no back: the action's own page
		}
		checkLocation(t, f, "POST resume back="+short(tc.next), r, want)
	}
}
