package delivery

import (
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// A delivery left pending because every slot was taken is not overtaken
// by the deliveries of later events: while the destination has a
// backlog, ingest claims nothing and a freed slot goes to the
// dispatcher's claim, oldest first. Without that, under a sustained load
// above what the destination takes, every freed slot went to the next
// ingest batch and the backlog (and every due retry) waited for the load
// to end. The dispatcher is played by hand: no loop competes for the
// slots.
func TestClaimAtIngestDoesNotOvertakeABacklog(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := New(st, Options{PollInterval: time.Hour, Destinations: []Destination{{Name: "dest", URL: "http://127.0.0.1:1", Timeout: time.Minute,
		MaxAttempts: 3, Initial: time.Second, Max: time.Second, StalePolicy: anyhook.Hold, MaxInFlight: 2}}})
	sl := e.slots["dest"]
	handed := 0
	sl.open(func(cs []store.Claim, _ time.Time) { handed += len(cs) })
	sl.drainedAt(sl.mark()) // the dispatcher's first claim found nothing
	rec := e.ClaimAtIngest(st)
	n := 0
	ingest := func() store.NewEvent {
		t.Helper()
		n++
		ne := store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "s", DedupKey: "k" + strconv.Itoa(n), ReceivedAt: time.Now(),
			Method: "POST", Path: "/webhooks/s", Header: http.Header{}, Body: []byte(`{}`)}, Destinations: []string{"dest"}}
		if _, err := rec.Ingest(t.Context(), []store.NewEvent{ne}); err != nil {
			t.Fatal(err)
		}
		return ne
	}
	status := func(ne store.NewEvent) anyhook.DeliveryStatus {
		t.Helper()
		ev, err := st.Event(t.Context(), ne.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		return ev.Deliveries[0].Status
	}
	a, b := ingest(), ingest()
	if status(a) != anyhook.StatusDelivering || status(b) != anyhook.StatusDelivering {
		t.Fatalf("with 2 free slots: %s, %s; want both claimed at ingest", status(a), status(b))
	}
	old := ingest()
	if status(old) != anyhook.StatusPending {
		t.Fatalf("with no free slot: %s, want pending", status(old))
	}
	// a's request ends and its outcome is recorded: one slot is free.
	if handed != 2 {
		t.Fatalf("handed %d claims, want 2", handed)
	}
	sl.sent()
	sl.finish()
	if fresh := ingest(); status(fresh) != anyhook.StatusPending {
		t.Fatalf("a new event's delivery was claimed at ingest (%s) while an older one waited pending for a slot", status(fresh))
	}
	// Once the dispatcher's claim comes back short (the queue is empty),
	// ingest claims again; not if the queue was undrained (a wake, an
	// ingest short of slots) after that claim began.
	m := sl.mark()
	sl.undrain()
	sl.drainedAt(m)
	if status(ingest()) != anyhook.StatusPending {
		t.Fatal("claimed at ingest although the queue was undrained after the dispatcher's claim began")
	}
	sl.drainedAt(sl.mark())
	if fresh := ingest(); status(fresh) != anyhook.StatusDelivering {
		t.Fatalf("after the backlog drained: %s, want claimed at ingest", status(fresh))
	}
}
