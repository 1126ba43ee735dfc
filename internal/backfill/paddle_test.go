package backfill_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	paddle "github.com/PaddleHQ/paddle-go-sdk/v4"
	"github.com/PaddleHQ/paddle-go-sdk/v4/pkg/paddleerr"

	"github.com/anyhook/anyhook/internal/backfill"
	"github.com/anyhook/anyhook/internal/backfill/backfilltest"
)

const paddleKey = "pdl_sdbx_apikey_0123456789"

// TestPaddleFakeWithPaddleSDK lists the fake's events through Paddle's own
// Go SDK (its Collection follows meta.pagination.next while has_more, and
// decodes each event by its event_type), and reads its errors as
// Paddle's.
func TestPaddleFakeWithPaddleSDK(t *testing.T) {
	t.Parallel()
	fake := backfilltest.NewPaddle(t, paddleKey)
	base := time.Now().Add(-5 * time.Hour).Truncate(time.Second)
	var ids []string
	for i := range 230 {
		id, _ := fake.Add("transaction.completed", fmt.Sprintf("txn_%03d", i), base.Add(time.Duration(i)*time.Minute))
		ids = append(ids, id)
	}
	c, err := paddle.New(paddleKey, paddle.WithBaseURL(fake.URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	res, err := c.ListEvents(ctx, &paddle.ListEventsRequest{PerPage: paddle.PtrTo(100)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = res.Iter(ctx, func(e paddle.Event) (bool, error) {
		v, ok := e.(*paddle.TransactionCompletedEvent)
		if !ok || v.Data.ID == "" {
			return false, fmt.Errorf("the SDK decoded %T", e)
		}
		got = append(got, v.EventID)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the SDK listed %d events, want %d newest first", len(got), len(want))
	}
	bad, _ := paddle.New("pdl_wrong", paddle.WithBaseURL(fake.URL))
	_, err = bad.ListEvents(ctx, &paddle.ListEventsRequest{})
	var pe *paddleerr.Error
	if !errors.As(err, &pe) || pe.Code != "forbidden" {
		t.Fatalf("bad key: %v", err)
	}
	fake.RateLimit(1)
	_, err = c.ListEvents(ctx, &paddle.ListEventsRequest{})
	if !errors.Is(err, paddle.ErrTooManyRequests) {
		t.Fatalf("429: %v", err)
	}
}

// TestPaddleLister lists a window through backfill.Paddle: the events in
// it, pages of 200 newest first with the after cursor, stopping at the
// first older event; a 429 waited out after its Retry-After.
func TestPaddleLister(t *testing.T) {
	t.Parallel()
	fake := backfilltest.NewPaddle(t, paddleKey)
	base := time.Now().Add(-50 * time.Hour).Truncate(time.Second)
	in := addMinutely(fake, "subscription.updated", "sub_1", base, 700, 100, 600)
	fake.RateLimit(2)
	var sl fakeSleep
	l := &backfill.Paddle{Client: backfill.Client{Base: fake.URL, Key: paddleKey, Sleep: sl.sleep}}
	got, pages := listIDs(t, l, base.Add(100*time.Minute), base.Add(600*time.Minute), "event_id")
	if !slices.Equal(got, in) || pages != 4 {
		t.Fatalf("listed %d events in %d pages, want %d in 4 (700 events, stopping at the first before the window)", len(got), pages, len(in))
	}
	if len(sl.waits) != 1 || sl.waits[0] != time.Second {
		t.Fatalf("429: waits %v, want one of Retry-After's 1s", sl.waits)
	}
	bad := &backfill.Paddle{Client: backfill.Client{Base: fake.URL, Key: "pdl_wrong_wrong_wrong"}}
	err := bad.List(t.Context(), base, time.Time{}, func([][]byte) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "api_key") {
		t.Fatalf("bad key: %v", err)
	}
}
