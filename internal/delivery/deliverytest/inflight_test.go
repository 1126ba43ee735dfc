package deliverytest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

func request(ctx context.Context, delivery, attempt, object, version string, stale bool) *http.Request {
	r := httptest.NewRequestWithContext(ctx, "POST", "http://sink/", nil)
	r.Header.Set("X-AnyHook-Delivery", delivery)
	r.Header.Set("X-AnyHook-Attempt", attempt)
	r.Header.Set("X-AnyHook-Source", "stripe")
	if object != "" {
		r.Header.Set("X-AnyHook-Object", object)
		r.Header.Set("X-AnyHook-Version", version)
	}
	if stale {
		r.Header.Set("X-AnyHook-Stale", "true")
	}
	return r
}

// InFlight flags attempts of one delivery, and (in order) deliveries of
// one object, in flight at once, and an unflagged lower version delivered
// after a higher one; requests one after the other, other objects, a
// flagged stale version and a request its sender abandoned are fine.
func TestInFlight(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var f InFlight
	f.Ordered = true
	a := f.Begin(request(ctx, "d1", "1", "o1", "2", false))
	b := f.Begin(request(ctx, "d2", "1", "o2", "1", false)) // another object alongside
	a(true)
	b(true)
	f.Begin(request(ctx, "d1", "2", "o1", "2", false))(true)   // the same delivery again, after
	f.Begin(request(ctx, "d3", "1", "o1", "1", true))(true)    // lower, but flagged stale
	f.Begin(request(ctx, "d4", "1", "o1", "10", false))(false) // failed: not delivered
	gone, cancel := context.WithCancel(ctx)
	abandoned := f.Begin(request(gone, "d5", "1", "o3", "1", false))
	cancel() // the sender gave up: no longer in flight
	testwait.For(t, "the abandoned request to end", func() bool { return f.Open() == 0 })
	f.Begin(request(ctx, "d5", "2", "o3", "1", false))(true)
	abandoned(true) // too late to count as delivered
	if r := f.Report(); r.Defects() != 0 || r.Requests != 7 {
		t.Fatalf("report = %+v, want 7 requests and no defect", r)
	}
	select {
	case <-f.Bad():
		t.Fatal("Bad closed without a defect")
	default:
	}

	c := f.Begin(request(ctx, "d6", "1", "o1", "3", false))
	f.Begin(request(ctx, "d6", "2", "o1", "3", false))(true) // its delivery and its object in flight
	c(false)
	f.Begin(request(ctx, "d7", "1", "o1", "1", false))(true) // lower than 3, unflagged
	r := f.Report()
	if r.PerDelivery != 1 || r.PerObject != 1 || r.Inversions != 1 || len(r.Examples) != 3 {
		t.Fatalf("report = %+v, want one overlap per delivery, one per object and one inversion", r)
	}
	<-f.Bad()

	// Not in order: objects do not matter.
	var u InFlight
	x := u.Begin(request(ctx, "d1", "1", "o1", "2", false))
	u.Begin(request(ctx, "d2", "1", "o1", "1", false))(true)
	x(true)
	if r := u.Report(); r.Defects() != 0 {
		t.Fatalf("unordered report = %+v, want no defect", r)
	}
}
