// Package redirecttest serves the redirects that a client's redirect
// policy (package redirect) is tested against, on 127.0.0.1.
package redirecttest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Codes are the redirect statuses to try.
var Codes = []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}

// Followed reports whether package redirect follows a POST redirected
// with code, to another origin (elsewhere) or within the first one.
func Followed(code int, elsewhere bool) bool {
	return !elsewhere && (code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect)
}

// Elsewhere is another origin: it records each request it is sent (its
// method and Referer) and answers 200.
type Elsewhere struct {
	*httptest.Server
	mu  sync.Mutex
	got []string
}

// NewElsewhere starts an Elsewhere, closed when t ends.
func NewElsewhere(t *testing.T) *Elsewhere {
	e := &Elsewhere{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.got = append(e.got, r.Method+" "+r.URL.Path+" Referer: "+r.Header.Get("Referer"))
		e.mu.Unlock()
	}))
	t.Cleanup(e.Close)
	return e
}

// Requests are the requests e was sent.
func (e *Elsewhere) Requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// Server answers every request but those to /moved with a redirect to
// /moved, under code: on to (another origin) or, when to is nil, on
// itself. It answers /moved 200, whatever the method (a GET that net/http
// made of a redirected POST must not look refused), and counts in posts
// the POSTs to /moved that arrived with their body. It is closed when t
// ends.
func Server(t *testing.T, code int, to *Elsewhere) (srv *httptest.Server, posts *atomic.Int64) {
	posts = new(atomic.Int64)
	var self string
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/moved":
			if b, _ := io.ReadAll(r.Body); r.Method == http.MethodPost && len(b) > 0 {
				posts.Add(1)
			}
		case to != nil:
			http.Redirect(w, r, to.URL+"/moved", code)
		default:
			http.Redirect(w, r, self+"/moved", code)
		}
	}))
	self = srv.URL
	t.Cleanup(srv.Close)
	return srv, posts
}
