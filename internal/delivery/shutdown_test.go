package delivery_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// answeredThenAborted is a transport whose responses arrive, and are then
// handed back only once the request's context is done: the shutdown's
// abort lands after the destination answered.
type answeredThenAborted struct {
	answered chan struct{}
}

func (a *answeredThenAborted) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	close(a.answered)
	<-req.Context().Done()
	return resp, nil
}

// A 2xx that arrived before a shutdown aborted the send is
// recorded, so an acknowledged delivery is not sent again after restart.
func TestShutdownRecordsAnsweredAttempt(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)

	id := store.NewID()
	if _, err := st.Ingest(t.Context(), []store.NewEvent{{
		Event:        anyhook.Event{ID: id, Source: "s", DedupKey: "k", ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/s", Header: http.Header{}, Body: []byte(`{}`)},
		Destinations: []string{"dest"},
	}}); err != nil {
		t.Fatal(err)
	}
	tr := &answeredThenAborted{answered: make(chan struct{})}
	e := delivery.New(st, delivery.Options{
		Client:       &http.Client{Transport: tr},
		PollInterval: 10 * time.Millisecond,
		Destinations: []delivery.Destination{{Name: "dest", URL: srv.URL, Timeout: time.Minute, MaxAttempts: 3, Initial: time.Second, Max: time.Second, StalePolicy: anyhook.Reclaim}},
	})
	e.Start(t.Context())
	<-tr.answered
	e.Stop(0) // no grace: in-flight sends are aborted at once

	ev, err := st.Event(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	d := ev.Deliveries[0]
	if d.Status != anyhook.StatusDelivered || len(d.Attempts) != 1 || d.Attempts[0].StatusCode != 200 {
		t.Fatalf("delivery = %s with attempts %+v; want delivered, its 200 recorded", d.Status, d.Attempts)
	}
}
