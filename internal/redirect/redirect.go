// Package redirect is the one redirect policy of the requests AnyHook
// sends with something to keep: a body to deliver (a destination, an
// alert channel, the log's checkpoint push) or a credential (the backfill's
// api_key). net/http's default policy re-sends a POST redirected with
// 301, 302 or 303 as a GET, whose 2xx would count as delivered what
// nobody received; it follows a 307 to any host with the body and a
// Referer naming the first URL (a Slack URL, a push_url's token); and it
// forwards the Authorization header to the same host name over plain
// http or on another port.
package redirect

import (
	"fmt"
	"net/http"
)

// MaxHops bounds the redirects followed for one request.
const MaxHops = 5

// Check reports why req, a redirect of the request via[0], must not be
// followed, or nil when it may be: it keeps the method (a POST only on
// 307 or 308), stays on the scheme and host (with the port) via[0] was
// sent to, and is within MaxHops.
func Check(req *http.Request, via []*http.Request) error {
	first := via[0]
	switch {
	case len(via) >= MaxHops:
		return fmt.Errorf("stopped after %d redirects", MaxHops)
	case req.URL.Scheme != first.URL.Scheme || req.URL.Host != first.URL.Host:
		return fmt.Errorf("redirected from %s://%s to %s://%s", first.URL.Scheme, first.URL.Host, req.URL.Scheme, req.URL.Host)
	case req.Method != first.Method:
		return fmt.Errorf("%s %s was redirected as a %s (only 307 and 308 keep the method)", first.Method, first.URL.Path, req.Method)
	}
	return nil
}

// AnswerOtherwise is an http.Client's CheckRedirect: a redirect Check
// allows is followed, and any other is the answer (a 3xx the caller
// counts as a failure).
func AnswerOtherwise(req *http.Request, via []*http.Request) error {
	if Check(req, via) != nil {
		return http.ErrUseLastResponse
	}
	return nil
}
