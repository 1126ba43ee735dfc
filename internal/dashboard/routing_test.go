package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// TestEventTypesAndNotRouted: the list shows each event's type and filters
// by a type glob; the event page shows the type and says where a filter
// kept the event from.
func TestEventTypesAndNotRouted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	add := func(key, typ string, notRouted ...string) string {
		dests := []string{}
		for _, d := range sources["stripe"] {
			if !strings.Contains(strings.Join(notRouted, ","), d) {
				dests = append(dests, d)
			}
		}
		res, err := f.store.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{
			ID: store.NewID(), Source: "stripe", DedupKey: key, ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/stripe",
			Header: http.Header{}, Body: []byte(`{}`), Type: typ, NotRouted: notRouted,
		}, Destinations: dests}})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		return res[0].ID
	}
	paid := add("evt_paid", "invoice.paid")
	refund := add("evt_refund", "charge.refunded", "billing")

	all := f.get("/events")
	mustContain(t, all, `data-type="invoice.paid">invoice.paid</td>`, `data-type="charge.refunded">charge.refunded</td>`,
		`<th>Type</th>`, `billing: filtered</span>`)
	only := f.get("/events?type=invoice.%2A")
	mustContain(t, only, paid, `value="invoice.*"`)
	if strings.Contains(only.body, refund) {
		t.Errorf("type=invoice.* lists %s (charge.refunded)", refund)
	}
	page := f.get("/events/" + refund)
	mustContain(t, page, `id="event-type">charge.refunded</dd>`, `<li data-not-routed="billing">not routed to <strong>billing</strong> (filter)</li>`)
	if strings.Contains(f.get("/events/"+paid).body, "not routed") {
		t.Error("an event routed everywhere says not routed")
	}
}

// TestWaitsBehind: billing delivers in order per object; of two events of
// one object, the later version's delivery waits behind the earlier one's,
// and the event page and the deliveries list say so, with a link.
func TestWaitsBehind(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	add := func(key, version string) anyhook.Event {
		res, err := f.store.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{
			ID: store.NewID(), Source: "stripe", DedupKey: key, ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/stripe",
			Header: http.Header{}, Body: []byte(`{}`), Object: "in_1", Version: version,
		}, Destinations: sources["stripe"]}})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		ev, err := f.store.Event(t.Context(), res[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	later, earlier := add("evt_2", "2"), add("evt_1", "1")
	var head string
	for _, d := range earlier.Deliveries {
		if d.Destination == "billing" {
			head = d.ID
		}
	}
	link := `waits behind delivery <a class="mono" href="/events/` + earlier.ID + `#d-` + head + `">` + head + `</a> (version 1) of the same object`
	mustContain(t, f.get("/events/"+later.ID), link)
	mustContain(t, f.get("/deliveries?status=pending"), link)
	if page := f.get("/events/" + earlier.ID); strings.Contains(page.body, "waits behind") {
		t.Error("the head says it waits behind something")
	}
	// audit has no order: nothing there waits.
	if n := strings.Count(f.get("/events/"+later.ID).body, "waits behind"); n != 1 {
		t.Errorf("%d deliveries of the later event wait, want 1 (billing's)", n)
	}
}
