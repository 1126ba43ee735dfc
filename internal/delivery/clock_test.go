package delivery_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
)

// TestEngineClock: the engine reads one clock, Options.Now, for all it
// stamps and dates: the attempt's start and duration, the signature's
// timestamp, and an HTTP-date Retry-After. The clock is years from the
// real one, so a time.Now left anywhere of these shows.
func TestEngineClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	stamps := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stamps <- r.Header.Get("Webhook-Timestamp")
		w.Header().Set("Retry-After", now.Add(2*time.Minute).Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	d := delivery.Destination{Name: "dest", URL: srv.URL, SigningSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		Timeout: 10 * time.Second, MaxAttempts: 3, Initial: time.Second, Max: time.Hour, MaxInFlight: 1}
	st := newFakeStore(claim("dest"))
	e := delivery.New(st, delivery.Options{Destinations: []delivery.Destination{d}, PollInterval: 10 * time.Millisecond,
		Now: func() time.Time { return now }})
	e.Start(t.Context())
	defer e.Stop(time.Second)

	if got, want := <-stamps, strconv.FormatInt(now.Unix(), 10); got != want {
		t.Errorf("Webhook-Timestamp = %s, want %s (the engine's clock)", got, want)
	}
	o := <-st.outcomes
	if o.Status != anyhook.StatusPending || !o.Result.StartedAt.Equal(now) || o.Result.Duration != 0 {
		t.Errorf("outcome %s, started %s, took %s; want pending, started %s, took 0 on a clock that stands still", o.Status, o.Result.StartedAt, o.Result.Duration, now)
	}
	if o.RetryIn != 2*time.Minute {
		t.Errorf("RetryIn = %s, want the Retry-After date's 2m0s from the engine's clock", o.RetryIn)
	}
}
