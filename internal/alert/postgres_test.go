package alert

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// TestTwoPostgresProcessesSendOnce: two gateways on one PostgreSQL
// database (each its own pool, as two processes have) raise the dead
// alerts of one destination at once. The channel gets the fold's first
// alert once and one summary standing for all the others once: the
// outbox folds across processes, and a message is claimed by one sender.
func TestTwoPostgresProcessesSendOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	r := newRecorder(t, http.StatusOK)
	const each = 10
	var ns [2]*Notifier
	for i := range ns {
		st, err := postgres.Open(t.Context(), dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		// An hour's window stays open through the test: the summary is
		// the one Stop queues.
		n, err := New([]Channel{{Webhook: r.srv.URL}}, Options{Outbox: st, Window: time.Hour, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		n.wrote = make(chan int, 4*each)
		n.Start(t.Context())
		t.Cleanup(n.Stop)
		ns[i] = n
	}
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() {
			for j := range each {
				n.Notify(t.Context(), dead("billing", i*each+j))
			}
		})
	}
	wg.Wait()
	for _, n := range ns {
		for left := each; left > 0; {
			left -= <-n.wrote
		}
	}
	r.next(t) // the first, sent by one of them
	ns[0].Stop()
	ns[1].Stop()
	posts := r.posts()
	accounted, seen := 0, map[string]bool{}
	for _, b := range posts {
		w := decode(t, b)
		accounted += 1 + w.More
		if seen[w.DeliveryID] {
			t.Errorf("%s posted twice", w.DeliveryID)
		}
		seen[w.DeliveryID] = true
	}
	if len(posts) != 2 || accounted != 2*each {
		var got []string
		for _, b := range posts {
			w := decode(t, b)
			got = append(got, fmt.Sprintf("%s+%d", w.DeliveryID, w.More))
		}
		t.Fatalf("posts %v, want 2 (the first, then a summary) accounting for %d alerts", got, 2*each)
	}
}
