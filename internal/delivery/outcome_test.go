package delivery_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
)

// Each attempt says what became of its request against a real server:
// not sent (the handler never ran), sent without an answer (it may have
// run), or answered.
func TestAttemptOutcomeKinds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		server  func(t *testing.T, ran *atomic.Int32) string // the destination URL
		timeout time.Duration
		want    string
		ran     bool // the handler read the request
	}{
		{"refused", refusingURL, 0, anyhook.OutcomeNotSent, false},
		{"tls failure", func(t *testing.T, ran *atomic.Int32) string { return okServer(t, true, ran).URL }, 0, anyhook.OutcomeNotSent, false},
		{"timeout", sleepingURL, 200 * time.Millisecond, anyhook.OutcomeNoAnswer, true},
		{"reset", resettingURL, 0, anyhook.OutcomeNoAnswer, true},
		{"500", answering500URL, 0, anyhook.OutcomeAnswered, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ran atomic.Int32
			o := attempt(t, delivery.Destination{URL: tc.server(t, &ran), Timeout: tc.timeout}, nil)
			if o.Result.Outcome != tc.want {
				t.Errorf("outcome %q (error %q), want %q", o.Result.Outcome, o.Result.Error, tc.want)
			}
			if o.Status == anyhook.StatusDelivered || o.Result.Error == "" {
				t.Errorf("status %s, error %q: want a failed attempt with its error", o.Status, o.Result.Error)
			}
			if got := ran.Load() > 0; got != tc.ran {
				t.Errorf("handler ran: %v, want %v", got, tc.ran)
			}
			if got := o.Result.MayHaveRun(); got != tc.ran {
				t.Errorf("MayHaveRun %v, but the handler ran: %v", got, tc.ran)
			}
		})
	}
}

// A request whose body the handler had not finished reading when the
// attempt gave up was sent all the same: its handler had started.
func TestPartlyWrittenRequestMayHaveRun(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1) // reads none of the body
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	c := claim("dest")
	c.Event.Body = bytes.Repeat([]byte("x"), 64<<20) // more than the sockets' buffers hold
	d := delivery.Destination{Name: "dest", URL: srv.URL, Timeout: 500 * time.Millisecond, MaxAttempts: 3, Initial: time.Second, Max: time.Second}
	o := attemptClaim(t, d, nil, c)
	if ran.Load() != 1 || o.Result.Outcome != anyhook.OutcomeNoAnswer {
		t.Errorf("handler ran %d times; outcome %q (error %q), want %q", ran.Load(), o.Result.Outcome, o.Result.Error, anyhook.OutcomeNoAnswer)
	}
}

// refusingURL is the address of a port nobody listens on any more.
func refusingURL(t *testing.T, _ *atomic.Int32) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/hook"
}

// sleepingURL's handler reads the request, then answers only once the
// client gave up.
func sleepingURL(t *testing.T, ran *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		ran.Add(1)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// resettingURL's handler reads the request, then resets the connection.
func resettingURL(t *testing.T, ran *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		ran.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0) // close with a RST
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func answering500URL(t *testing.T, ran *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		ran.Add(1)
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A destination that answers with a garbage status line of a megabyte
// must not make its attempt's error (stored with every attempt, copied to
// the incident's latest error and to alerts) a megabyte: what a
// destination can make the gateway keep is bounded, as its response body
// is (4 KiB).
func TestMalformedAnswerErrorBounded(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		buf.WriteString("<script>alert(1)</script>" + strings.Repeat("A", 1<<20) + "\r\n\r\n")
		buf.Flush()
	}))
	t.Cleanup(srv.Close)
	o := attempt(t, delivery.Destination{URL: srv.URL}, nil)
	if o.Status == anyhook.StatusDelivered {
		t.Fatalf("delivered; want a failed attempt")
	}
	if n := len(o.Result.Error); n > 4096 {
		t.Errorf("the attempt's error is %d bytes (starts %.120q): a destination can make every attempt store a megabyte", n, o.Result.Error)
	}
}
