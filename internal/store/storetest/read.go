package storetest

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// testListEventsByProviderID: one provider id in two sources of four ("a"
// sorting before the others and "zz" after): without a source both are
// found, newest first; with one, its own.
func testListEventsByProviderID(t *testing.T, s store.Store) {
	gh := ingest(t, s, newEvent("github", "k4", "billing"))[0].ID
	ingest(t, s, newEvent("stripe", "k5", "billing"))
	a := ingest(t, s, newEvent("a", "k4", "billing"))[0].ID
	ingest(t, s, newEvent("zz", "k9", "billing"))
	q, _, err := s.ListEvents(ctx(t), store.EventFilter{Q: "k4"})
	if err != nil || len(q) != 2 || q[0].ID != a || q[1].ID != gh {
		t.Errorf("q filter over sources: %+v, %v; want %s then %s", q, err, a, gh)
	}
	q, _, err = s.ListEvents(ctx(t), store.EventFilter{Q: "k4", Source: "a"})
	if err != nil || len(q) != 1 || q[0].ID != a {
		t.Errorf("q filter of source a: %+v, %v", q, err)
	}
	if q, _, err = s.ListEvents(ctx(t), store.EventFilter{Q: "k7"}); err != nil || len(q) != 0 {
		t.Errorf("q filter of an id no source has: %+v, %v", q, err)
	}
}

func testListEvents(t *testing.T, s store.Store) {
	var ids []string
	for i := range 7 {
		src := "stripe"
		if i%2 == 1 {
			src = "github"
		}
		ids = append(ids, ingest(t, s, newEvent(src, "k"+strconv.Itoa(i), "billing", "audit"))[0].ID)
	}
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		evs, next, err := s.ListEvents(ctx(t), store.EventFilter{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 3 {
			t.Fatalf("page of %d, limit 3", len(evs))
		}
		for _, ev := range evs {
			got = append(got, ev.ID)
		}
		if next == "" {
			break
		}
		cursor = next
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("paged ids = %v, want newest first %v", got, want)
	}
	gh, _, _ := s.ListEvents(ctx(t), store.EventFilter{Source: "github"})
	if len(gh) != 3 {
		t.Errorf("source filter: %d, want 3", len(gh))
	}
	q, _, _ := s.ListEvents(ctx(t), store.EventFilter{Q: "k4"})
	if len(q) != 1 || q[0].ID != ids[4] {
		t.Errorf("q filter: %+v", q)
	}
	c := claim(t, s, "billing", 1, time.Minute)[0]
	finish(t, s, delivered(c))
	done, _, _ := s.ListEvents(ctx(t), store.EventFilter{Status: anyhook.StatusDelivered})
	if len(done) != 1 || done[0].ID != c.Event.ID {
		t.Errorf("status filter: %+v", done)
	}
	// Most events have two pending deliveries: an event is listed once,
	// and paging by status neither skips nor repeats.
	var paged []string
	for cursor := ""; ; {
		evs, next, err := s.ListEvents(ctx(t), store.EventFilter{Status: anyhook.StatusPending, Source: "stripe", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			paged = append(paged, ev.ID)
		}
		if cursor = next; next == "" || len(paged) > 10 {
			break
		}
	}
	wantStripe := []string{ids[6], ids[4], ids[2], ids[0]} // audit is pending for all
	if !slices.Equal(paged, wantStripe) {
		t.Errorf("status paging = %v, want %v", paged, wantStripe)
	}
	none, _, _ := s.ListEvents(ctx(t), store.EventFilter{Since: received.Add(time.Second)})
	all, _, _ := s.ListEvents(ctx(t), store.EventFilter{Since: received, Until: received.Add(time.Second)})
	if len(none) != 0 || len(all) != 7 {
		t.Errorf("time filter: since later = %d (want 0), window = %d (want 7)", len(none), len(all))
	}
	// A prefix of the event id, of the provider event id, or of a
	// delivery's id, within the window; the type exactly, case ignored.
	ev, err := s.Event(ctx(t), ids[3])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ids[3][:30], "k3", ev.Deliveries[0].ID[:32]} {
		evs, _, err := s.ListEvents(ctx(t), store.EventFilter{Prefix: p, Since: received})
		if err != nil || len(evs) == 0 || !slices.ContainsFunc(evs, func(e anyhook.Event) bool { return e.ID == ids[3] }) {
			t.Errorf("prefix %q: %d events, %v; want %s among them", p, len(evs), err, ids[3])
		}
	}
	if evs, _, err := s.ListEvents(ctx(t), store.EventFilter{Prefix: "k3x", Since: received}); err != nil || len(evs) != 0 {
		t.Errorf("prefix k3x: %d events, %v; want none", len(evs), err)
	}
}

func testListDeliveries(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "a", "billing", "audit"), newEvent("github", "b", "billing"))
	all, _, err := s.ListDeliveries(ctx(t), store.DeliveryFilter{})
	if err != nil || len(all) != 3 {
		t.Fatalf("all = %d, %v", len(all), err)
	}
	billing, _, _ := s.ListDeliveries(ctx(t), store.DeliveryFilter{Destination: "billing"})
	gh, _, _ := s.ListDeliveries(ctx(t), store.DeliveryFilter{Source: "github"})
	if len(billing) != 2 || len(gh) != 1 {
		t.Fatalf("billing = %d (want 2), github = %d (want 1)", len(billing), len(gh))
	}
	p1, next, _ := s.ListDeliveries(ctx(t), store.DeliveryFilter{Limit: 2})
	p2, end, _ := s.ListDeliveries(ctx(t), store.DeliveryFilter{Limit: 2, Cursor: next})
	if len(p1) != 2 || len(p2) != 1 || end != "" || p2[0].ID == p1[0].ID || p2[0].ID == p1[1].ID {
		t.Fatalf("paging: %v then %v (end %q)", p1, p2, end)
	}
	// Deliveries of two sources to one destination, one of them a replay
	// (a delivery the store creates after ingest keeps its event's source
	// too): each source's filter finds its own, alone or with the
	// destination; a source that never sent there finds none.
	replay, err := s.Replay(ctx(t), gh[0].EventID, []string{"billing"}, tester)
	if err != nil || len(replay) != 1 {
		t.Fatalf("replay: %v, %v", replay, err)
	}
	stripeBilling := billing[0].ID
	if stripeBilling == gh[0].ID {
		stripeBilling = billing[1].ID
	}
	for _, c := range []struct {
		f    store.DeliveryFilter
		want []string
	}{
		{store.DeliveryFilter{Source: "github", Destination: "billing"}, []string{replay[0].ID, gh[0].ID}},
		{store.DeliveryFilter{Source: "github"}, []string{replay[0].ID, gh[0].ID}},
		{store.DeliveryFilter{Source: "stripe", Destination: "billing"}, []string{stripeBilling}},
		{store.DeliveryFilter{Source: "github", Destination: "audit"}, nil},
		{store.DeliveryFilter{Source: "gitlab", Destination: "billing"}, nil},
		{store.DeliveryFilter{Source: "gitlab"}, nil},
		{store.DeliveryFilter{Source: "github", Status: anyhook.StatusPending}, []string{replay[0].ID, gh[0].ID}},
	} {
		ds, _, err := s.ListDeliveries(ctx(t), c.f)
		var got []string
		for _, d := range ds {
			got = append(got, d.ID)
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("deliveries %+v: %q, %v; want %q", c.f, got, err, c.want)
		}
	}
}

func testCounts(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "a", "billing", "audit"), newEvent("stripe", "b", "billing"))
	c := claim(t, s, "billing", 1, time.Minute)[0]
	finish(t, s, delivered(c))
	m, err := s.Counts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if m[anyhook.StatusPending] != 2 || m[anyhook.StatusDelivered] != 1 {
		t.Fatalf("counts = %v", m)
	}
}

// testSearchBodies holds a search inside the bodies to its window and
// budget: newest first, stopping only between two receive times, and
// saying where to continue.
func testSearchBodies(t *testing.T, s store.Store) {
	// Six events a minute apart, the two oldest in one instant; every
	// other one names cus_123. One more, a day and an hour older (outside
	// the day a search looks at first: store.BodyWindow), also does.
	at := func(i int) time.Time { return received.Add(time.Duration(i) * time.Minute) }
	var ids []string
	for i, min := range []int{0, 0, 1, 2, 3, 4} {
		e := newEvent("stripe", "b"+strconv.Itoa(i), "billing")
		e.Event.ReceivedAt = at(min)
		if i%2 == 0 {
			e.Event.Body = []byte(`{"customer":"cus_123","n":` + strconv.Itoa(i) + `}`)
		}
		ids = append(ids, ingest(t, s, e)[0].ID)
	}
	old := newEvent("stripe", "old", "billing")
	old.Event.ReceivedAt = received.Add(-25 * time.Hour)
	old.Event.Body = []byte(`{"customer":"cus_123"}`)
	oldID := ingest(t, s, old)[0].ID
	now := at(10)
	has := func(ev *anyhook.Event) (bool, uint64) { return strings.Contains(string(ev.Body), "cus_123"), 0 }
	idsOf := func(evs []anyhook.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		return out
	}
	search := func(f store.EventFilter, b store.BodyBudget) ([]string, store.Searched) {
		t.Helper()
		evs, sr, err := store.SearchBodies(ctx(t), s, f, has, now, b)
		if err != nil {
			t.Fatal(err)
		}
		return idsOf(evs), sr
	}
	// The whole window: every match in it, newest first; not complete, as
	// the window ended a day back.
	got, sr := search(store.EventFilter{}, store.DefaultBodyBudget)
	if want := []string{ids[4], ids[2], ids[0]}; !slices.Equal(got, want) || sr.Complete || !sr.BackTo.Equal(now.Add(-store.BodyWindow)) {
		t.Errorf("window: %v, %+v; want %v back to %v", got, sr, want, now.Add(-store.BodyWindow))
	}
	// A limit of one: the newest match, and back to its receive time;
	// continuing from there finds the next.
	got, sr = search(store.EventFilter{Limit: 1}, store.DefaultBodyBudget)
	if !slices.Equal(got, []string{ids[4]}) || sr.Complete || !sr.BackTo.Equal(at(3)) {
		t.Errorf("limit 1: %v, %+v; want [%s] back to %v", got, sr, ids[4], at(3))
	}
	got, _ = search(store.EventFilter{Limit: 1, Until: sr.BackTo}, store.DefaultBodyBudget)
	if !slices.Equal(got, []string{ids[2]}) {
		t.Errorf("continued: %v, want [%s]", got, ids[2])
	}
	// A budget of four rows stops at minute 1; of five, it reads both
	// events of minute 0 (it stops between receive times only).
	got, sr = search(store.EventFilter{}, store.BodyBudget{Rows: 4, Bytes: 1 << 20})
	if !slices.Equal(got, []string{ids[4], ids[2]}) || !sr.BackTo.Equal(at(1)) {
		t.Errorf("4 rows: %v, %+v; want [%s %s] back to %v", got, sr, ids[4], ids[2], at(1))
	}
	got, sr = search(store.EventFilter{}, store.BodyBudget{Rows: 5, Bytes: 1 << 20})
	if !slices.Equal(got, []string{ids[4], ids[2], ids[0]}) || !sr.BackTo.Equal(now.Add(-store.PrefixWindow)) {
		t.Errorf("5 rows: %v, %+v; want all three back to the window's start", got, sr)
	}
	// A byte budget stops as a row budget does.
	_, sr = search(store.EventFilter{}, store.BodyBudget{Rows: 100, Bytes: 1})
	if sr.Complete || !sr.BackTo.Equal(at(4)) {
		t.Errorf("1 byte: %+v, want back to %v", sr, at(4))
	}
	// A window of the caller's, inside the bounded one, is complete; one
	// further back finds the old event.
	if _, sr = search(store.EventFilter{Since: received}, store.DefaultBodyBudget); !sr.Complete {
		t.Errorf("since %v: %+v, want complete", received, sr)
	}
	// No event is older than that window: the search is complete, else
	// "search further" would step back an hour at a time for ever.
	got, sr = search(store.EventFilter{Until: received.Add(-time.Hour)}, store.DefaultBodyBudget)
	if !slices.Equal(got, []string{oldID}) || !sr.Complete {
		t.Errorf("an hour further back: %v, %+v; want [%s], complete", got, sr, oldID)
	}
}

// testSavedSearches: saved searches are kept by name, a name once, and
// deleted by id.
func testSavedSearches(t *testing.T, s store.Store) {
	if got, err := s.ListSavedSearches(ctx(t)); err != nil || len(got) != 0 {
		t.Fatalf("a new store lists %v, %v", got, err)
	}
	b := store.SavedSearch{ID: store.NewID(), Name: "big invoices", Query: "q=filter%3Abody.amount+%3E+1000", CreatedAt: received, CreatedBy: "api"}
	a := store.SavedSearch{ID: store.NewID(), Name: "acme", Query: "source=stripe&q=body%3Acus_123", CreatedAt: received.Add(time.Second), CreatedBy: "dashboard"}
	for _, ss := range []store.SavedSearch{b, a} {
		if err := s.SaveSearch(ctx(t), ss); err != nil {
			t.Fatal(err)
		}
	}
	again := a
	again.ID, again.Query = store.NewID(), "q=other"
	if err := s.SaveSearch(ctx(t), again); !errors.Is(err, anyhook.ErrInvalid) || !strings.Contains(err.Error(), `"acme"`) {
		t.Errorf("a second search named acme: %v; want ErrInvalid naming it", err)
	}
	got, err := s.ListSavedSearches(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID || got[0].Query != a.Query || got[0].CreatedBy != "dashboard" ||
		!got[0].CreatedAt.Equal(a.CreatedAt) || got[1].Name != "big invoices" {
		t.Errorf("listed %+v; want acme then big invoices, as saved", got)
	}
	if err := s.DeleteSavedSearch(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSavedSearch(ctx(t), a.ID); !errors.Is(err, anyhook.ErrNotFound) {
		t.Errorf("deleting it twice: %v; want ErrNotFound", err)
	}
	if got, _ := s.ListSavedSearches(ctx(t)); len(got) != 1 || got[0].ID != b.ID {
		t.Errorf("after the delete: %+v", got)
	}
	// The name is free again.
	if err := s.SaveSearch(ctx(t), again); err != nil {
		t.Errorf("acme again after its delete: %v", err)
	}
}

// testDeliveriesOfEvents: DeliveryFilter.EventIDs keeps the deliveries of
// those events (a bulk replay by filter), none when empty, and a replay
// by it replays only those.
func testDeliveriesOfEvents(t *testing.T, s store.Store) {
	res := ingest(t, s, newEvent("stripe", "e1", "billing"), newEvent("stripe", "e2", "billing"), newEvent("stripe", "e3", "billing"))
	ds, _, err := s.ListDeliveries(ctx(t), store.DeliveryFilter{EventIDs: []string{res[0].ID, res[2].ID}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.EventID)
	}
	if want := []string{res[2].ID, res[0].ID}; !slices.Equal(got, want) {
		t.Errorf("deliveries of e1 and e3: %v, want %v", got, want)
	}
	if ds, _, err := s.ListDeliveries(ctx(t), store.DeliveryFilter{EventIDs: []string{}}); err != nil || len(ds) != 0 {
		t.Errorf("of no events: %d deliveries, %v; want none", len(ds), err)
	}
	for _, c := range claim(t, s, "billing", 3, time.Minute) {
		finish(t, s, delivered(c))
	}
	br, err := s.ReplayDeliveries(ctx(t), store.DeliveryFilter{EventIDs: []string{res[1].ID}, Status: anyhook.StatusDelivered}, store.Actor{Name: "test"})
	if err != nil || br.Count != 1 {
		t.Fatalf("replay of e2: %+v, %v; want one", br, err)
	}
	if cs := claim(t, s, "billing", 10, time.Minute); len(cs) != 1 || cs[0].Event.ID != res[1].ID || !cs[0].Delivery.Replay {
		t.Errorf("claimed after the replay: %+v; want e2's replay", cs)
	}
}
