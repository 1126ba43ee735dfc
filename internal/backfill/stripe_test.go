package backfill_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v85"

	"github.com/anyhook/anyhook/internal/backfill"
	"github.com/anyhook/anyhook/internal/backfill/backfilltest"
)

const key = "sk_test_backfill0123456789"

// stripeClient is stripe-go's client pointed at the fake.
func stripeClient(fake *backfilltest.Stripe, key string) *stripego.Client {
	b := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{
		URL: stripego.String(fake.URL), MaxNetworkRetries: stripego.Int64(0),
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	})
	return stripego.NewClient(key, stripego.WithBackends(&stripego.Backends{API: b, Connect: b, Uploads: b, MeterEvents: b}))
}

// TestStripeFakeWithStripeGo lists the fake's events through stripe-go's
// own client: its pagination (starting_after, has_more), created range,
// type filters and errors are read as Stripe's, so the fake's shapes are
// the real ones.
func TestStripeFakeWithStripeGo(t *testing.T) {
	t.Parallel()
	fake := backfilltest.NewStripe(t, key)
	base := time.Now().Add(-10 * time.Hour).Truncate(time.Second)
	var ids []string
	for i := range 250 {
		typ := "invoice.paid"
		if i%3 == 0 {
			typ = "customer.updated"
		}
		id, _ := fake.Add(typ, "obj_"+string(rune('a'+i%7)), base.Add(time.Duration(i)*time.Minute))
		ids = append(ids, id)
	}
	sc := stripeClient(fake, key)
	ctx := t.Context()

	// Auto-paging over the whole window, 100 a page: every event, newest
	// first, each decoded by stripe-go into its Event type.
	params := &stripego.EventListParams{CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: base.Unix(), LesserThanOrEqual: base.Add(249 * time.Minute).Unix()}}
	params.Limit = stripego.Int64(100)
	var got []string
	for ev, err := range sc.V1Events.List(ctx, params).All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Object != "event" || ev.Data == nil || ev.Data.Object["id"] == nil || ev.Created == 0 {
			t.Fatalf("stripe-go decoded %+v", ev)
		}
		got = append(got, ev.ID)
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("stripe-go listed %d events (first %v), want all %d newest first", len(got), got[:min(3, len(got))], len(want))
	}
	if qs := fake.Queries(); len(qs) != 3 || !strings.Contains(qs[1], "starting_after="+want[99]) {
		t.Fatalf("stripe-go paged with %v, want 3 pages, the second after %s", qs, want[99])
	}

	// A window and a type filter.
	params = &stripego.EventListParams{CreatedRange: &stripego.RangeQueryParams{GreaterThan: base.Add(9 * time.Minute).Unix(), LesserThan: base.Add(21 * time.Minute).Unix()}, Type: stripego.String("customer.*")}
	got = got[:0]
	for ev, err := range sc.V1Events.List(ctx, params).All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.ID)
	}
	if !slices.Equal(got, []string{ids[18], ids[15], ids[12]}) {
		t.Fatalf("window (9, 21) minutes, customer.*: %v", got)
	}

	// Errors as Stripe gives them.
	for ev, err := range stripeClient(fake, "sk_test_wrong").V1Events.List(ctx, &stripego.EventListParams{}).All(ctx) {
		var se *stripego.Error
		if !errors.As(err, &se) || se.HTTPStatusCode != http.StatusUnauthorized || !strings.Contains(se.Msg, "Invalid API Key") {
			t.Fatalf("bad key: %v %v", ev, err)
		}
		break
	}
	p := &stripego.EventListParams{}
	p.StartingAfter = stripego.String("evt_nosuch")
	for _, err := range sc.V1Events.List(ctx, p).All(ctx) {
		var se *stripego.Error
		if !errors.As(err, &se) || se.HTTPStatusCode != http.StatusBadRequest || se.Code != stripego.ErrorCodeResourceMissing || se.Param != "starting_after" {
			t.Fatalf("unknown cursor: %v", err)
		}
		break
	}
	fake.RateLimit(1)
	for _, err := range sc.V1Events.List(ctx, &stripego.EventListParams{}).All(ctx) {
		var se *stripego.Error
		if !errors.As(err, &se) || se.HTTPStatusCode != http.StatusTooManyRequests || se.Code != stripego.ErrorCodeRateLimit {
			t.Fatalf("429: %v", err)
		}
		break
	}
}

// adder is a fake provider API that events are added to.
type adder interface {
	Add(typ, objectID string, at time.Time) (id string, body []byte)
}

// addMinutely adds n events of type typ about objectID to fake, a minute
// apart from base, and returns the ids of the i-th for lo <= i <= hi.
// listIDs lists [from, to] with l and returns the events' ids (the JSON
// field idField), oldest first, and the number of pages.
func listIDs(t *testing.T, l backfill.Lister, from, to time.Time, idField string) (ids []string, pages int) {
	t.Helper()
	err := l.List(t.Context(), from, to, func(bodies [][]byte) error {
		pages++
		for _, b := range bodies {
			var ev map[string]any
			if err := json.Unmarshal(b, &ev); err != nil {
				return err
			}
			id, _ := ev[idField].(string)
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(ids) // the providers list newest first
	return ids, pages
}

func addMinutely(fake adder, typ, objectID string, base time.Time, n, lo, hi int) []string {
	var in []string
	for i := range n {
		id, _ := fake.Add(typ, objectID, base.Add(time.Duration(i)*time.Minute))
		if i >= lo && i <= hi {
			in = append(in, id)
		}
	}
	return in
}

// fakeSleep records waits instead of waiting.
type fakeSleep struct{ waits []time.Duration }

func (f *fakeSleep) sleep(_ context.Context, d time.Duration) error {
	f.waits = append(f.waits, d)
	return nil
}

// TestStripeLister lists a window through backfill.Stripe: every event in
// it and none outside, a 429 mid-way waited out with back-off, a bad key a
// clear error naming the api_key and never the key itself.
func TestStripeLister(t *testing.T) {
	t.Parallel()
	fake := backfilltest.NewStripe(t, key)
	base := time.Now().Add(-30 * time.Hour).Truncate(time.Second)
	in := addMinutely(fake, "invoice.paid", "in_1", base, 230, 5, 220)
	fake.RateLimit(2)
	var sl fakeSleep
	l := &backfill.Stripe{Client: backfill.Client{Base: fake.URL, Key: key, Sleep: sl.sleep}}
	limited := 0
	l.OnRateLimit(func() { limited++ })
	got, pages := listIDs(t, l, base.Add(5*time.Minute), base.Add(220*time.Minute), "id")
	if !slices.Equal(got, in) || pages != 3 {
		t.Fatalf("listed %d events in %d pages, want %d in 3", len(got), pages, len(in))
	}
	if limited != 1 || len(sl.waits) != 1 || sl.waits[0] <= 0 {
		t.Fatalf("429: counted %d, waits %v; want one wait", limited, sl.waits)
	}
	for _, q := range fake.Queries() {
		if !strings.Contains(q, "limit=100") || !strings.Contains(q, "created%5Bgte%5D=") || !strings.Contains(q, "created%5Blte%5D=") {
			t.Fatalf("query %q lacks limit=100 or the created range", q)
		}
	}

	bad := &backfill.Stripe{Client: backfill.Client{Base: fake.URL, Key: "sk_test_wrongwrongwrong", Sleep: sl.sleep}}
	err := bad.List(t.Context(), base, time.Time{}, func([][]byte) error { t.Fatal("a page with a bad key"); return nil })
	var ae *backfill.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "api_key") || strings.Contains(err.Error(), "wrongwrongwrong") {
		t.Fatalf("bad key: %v", err)
	}
}
