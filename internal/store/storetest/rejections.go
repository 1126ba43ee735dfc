package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// runRejections holds a backend's store.RejectionLog (the bounded log of
// refused requests) to the same behaviour.
func runRejections(t *testing.T, open Open) {
	runTable(t, []named[func(*testing.T, store.RejectionLog)]{
		{"RoundTripAndFilters", testRejectionsRoundTrip},
		{"Paging", testRejectionsPaging},
		{"Prune", testRejectionsPrune},
		{"FindByID", testRejectionsFindByID},
	}, func(t *testing.T, fn func(*testing.T, store.RejectionLog)) {
		fn(t, open(t))
	})
}

func rejection(source string, known bool, reason string, at time.Time) anyhook.Rejection {
	return anyhook.Rejection{At: at, Source: source, KnownSource: known, Reason: reason, Status: 400,
		Message: "no signature matched", RemoteAddr: "203.0.113.9:5555", UserAgent: "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
		BodySize: 1234, BodySHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", HeaderCount: 9, HeaderBytes: 612}
}

func record(t *testing.T, l store.RejectionLog, rs ...anyhook.Rejection) {
	t.Helper()
	if err := l.RecordRejections(ctx(t), rs); err != nil {
		t.Fatalf("RecordRejections: %v", err)
	}
}

func listRejections(t *testing.T, l store.RejectionLog, f store.RejectionFilter) ([]anyhook.Rejection, string) {
	t.Helper()
	rs, next, err := l.ListRejections(ctx(t), f)
	if err != nil {
		t.Fatalf("ListRejections(%+v): %v", f, err)
	}
	return rs, next
}

func testRejectionsRoundTrip(t *testing.T, l store.RejectionLog) {
	sig := rejection("stripe", true, anyhook.RejectSignature, received)
	sig.IDs = []anyhook.RequestID{{Name: "Stripe-Signature t", Value: "1700000000"}, {Name: "body id", Value: "evt_badsig"}}
	unknown := anyhook.Rejection{At: received.Add(time.Second), Source: "wp-login.php", Reason: anyhook.RejectUnknownSource, Status: 404,
		Message: `unknown source "wp-login.php"`, RemoteAddr: "198.51.100.1:1", BodySize: -1}
	big := rejection("stripe", true, anyhook.RejectTooLarge, received.Add(2*time.Second))
	big.Status, big.BodySHA256, big.BodySize = 413, "", 20<<20
	record(t, l, sig, unknown)
	record(t, l, big)

	all, next := listRejections(t, l, store.RejectionFilter{})
	if len(all) != 3 || next != "" {
		t.Fatalf("all: %d rejections, next %q", len(all), next)
	}
	for i, want := range []anyhook.Rejection{big, unknown, sig} { // newest first
		got := all[i]
		if got.ID <= 0 || (i > 0 && got.ID >= all[i-1].ID) {
			t.Errorf("rejection %d: id %d (ids must increase with age)", i, got.ID)
		}
		want.ID = got.ID
		if !got.At.Equal(want.At) {
			t.Errorf("rejection %d: at %v, want %v", i, got.At, want.At)
		}
		want.At = got.At
		if !reflect.DeepEqual(got, want) {
			t.Errorf("rejection %d = %+v, want %+v", i, got, want)
		}
	}
	for _, tc := range []struct {
		f    store.RejectionFilter
		want []string // reasons, newest first
	}{
		{store.RejectionFilter{Source: "stripe"}, []string{anyhook.RejectTooLarge, anyhook.RejectSignature}},
		{store.RejectionFilter{Reason: anyhook.RejectUnknownSource}, []string{anyhook.RejectUnknownSource}},
		{store.RejectionFilter{Source: "stripe", Reason: anyhook.RejectSignature}, []string{anyhook.RejectSignature}},
		{store.RejectionFilter{Since: received.Add(time.Second)}, []string{anyhook.RejectTooLarge, anyhook.RejectUnknownSource}},
		{store.RejectionFilter{Until: received.Add(time.Second)}, []string{anyhook.RejectSignature}},
		{store.RejectionFilter{Source: "github"}, nil},
	} {
		rs, _ := listRejections(t, l, tc.f)
		var got []string
		for _, r := range rs {
			got = append(got, r.Reason)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ListRejections(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
	if _, _, err := l.ListRejections(ctx(t), store.RejectionFilter{Cursor: "x"}); !errors.Is(err, anyhook.ErrInvalid) {
		t.Errorf("bad cursor: %v, want ErrInvalid", err)
	}
}

func testRejectionsPaging(t *testing.T, l store.RejectionLog) {
	var rs []anyhook.Rejection
	for i := range 7 {
		rs = append(rs, rejection(fmt.Sprintf("s%d", i), true, anyhook.RejectSignature, received.Add(time.Duration(i)*time.Second)))
	}
	record(t, l, rs...)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, next := listRejections(t, l, store.RejectionFilter{Limit: 3, Cursor: cursor})
		for _, r := range page {
			got = append(got, r.Source)
		}
		if next == "" {
			if pages != 2 {
				t.Errorf("%d pages, want 3", pages+1)
			}
			break
		}
		cursor = next
	}
	if !slices.Equal(got, []string{"s6", "s5", "s4", "s3", "s2", "s1", "s0"}) {
		t.Errorf("pages = %v", got)
	}
}

func testRejectionsPrune(t *testing.T, l store.RejectionLog) {
	for i := range 7 {
		record(t, l, rejection(fmt.Sprintf("known%d", i), true, anyhook.RejectSignature, received))
		if i < 5 {
			record(t, l, rejection(fmt.Sprintf("unknown%d", i), false, anyhook.RejectUnknownSource, received))
		}
	}
	n, err := l.PruneRejections(ctx(t), 3, 2)
	if err != nil || n != 7 {
		t.Fatalf("PruneRejections(3, 2) = %d, %v; want 7 deleted", n, err)
	}
	rs, _ := listRejections(t, l, store.RejectionFilter{})
	var got []string
	for _, r := range rs {
		got = append(got, r.Source)
	}
	if want := []string{"known6", "known5", "unknown4", "known4", "unknown3"}; !slices.Equal(got, want) {
		t.Errorf("after pruning: %v, want %v", got, want)
	}
	if n, err := l.PruneRejections(ctx(t), 3, 2); err != nil || n != 0 {
		t.Errorf("pruning again = %d, %v; want nothing to do", n, err)
	}
	// The ids of later records keep rising after a prune.
	record(t, l, rejection("later", true, anyhook.RejectSignature, received))
	if rs2, _ := listRejections(t, l, store.RejectionFilter{Limit: 1}); rs2[0].Source != "later" || rs2[0].ID <= rs[0].ID {
		t.Errorf("after prune, newest = %+v (previous newest id %d)", rs2[0], rs[0].ID)
	}
	if n, err := l.PruneRejections(ctx(t), 0, 0); err != nil || n != 6 {
		t.Errorf("PruneRejections(0, 0) = %d, %v; want all 6 deleted", n, err)
	}
}

// testRejectionsFindByID: q finds a rejection by its source's name or by
// one of its ids' values, whole and case-sensitive, never by an id's
// name, a part of a value, or a value of another row.
func testRejectionsFindByID(t *testing.T, l store.RejectionLog) {
	gh := rejection("github", true, anyhook.RejectSignature, received)
	gh.IDs = []anyhook.RequestID{{Name: "X-Github-Delivery", Value: "72d3162e-cc78-11e3-81ab-4c9367dc0958"}, {Name: "X-Github-Hook-Id", Value: "292430182"}}
	st := rejection("stripe", true, anyhook.RejectSignature, received.Add(time.Second))
	st.IDs = []anyhook.RequestID{{Name: "Stripe-Signature t", Value: "1700000000"}, {Name: "body id", Value: "evt_badsig"}}
	old := rejection("stripe", true, anyhook.RejectSignature, received.Add(2*time.Second)) // recorded with no ids
	record(t, l, gh, st, old)
	for q, want := range map[string][]string{
		"evt_badsig":                           {"stripe"},
		"72d3162e-cc78-11e3-81ab-4c9367dc0958": {"github"},
		"292430182":                            {"github"},
		"stripe":                               {"stripe", "stripe"},
		"github":                               {"github"},
		"evt_BADSIG":                           nil, // case matters
		"evt_bad":                              nil, // whole values only
		"body id":                              nil, // names are not values
		"X-Github-Delivery":                    nil,
		"1700000000\nbody id":                  nil,
	} {
		rs, _ := listRejections(t, l, store.RejectionFilter{Q: q})
		var got []string
		for _, r := range rs {
			got = append(got, r.Source)
		}
		if !slices.Equal(got, want) {
			t.Errorf("q %q: %v, want %v", q, got, want)
		}
	}
	rs, _ := listRejections(t, l, store.RejectionFilter{Q: "evt_badsig", Source: "github"})
	if len(rs) != 0 {
		t.Errorf("q with another source: %d rejections", len(rs))
	}
}
