package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// StripeBase is Stripe's API root.
const StripeBase = "https://api.stripe.com"

// Stripe lists events through Stripe's List all events API
// (GET /v1/events): created[gte] and created[lte] bound the window,
// limit=100, and starting_after (the last event id of a page) pages on
// while has_more. Stripe lists newest first, and keeps events for 30 days.
type Stripe struct{ Client }

// stripeList is a page of Stripe's list object.
type stripeList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

// List implements Lister.
func (s *Stripe) List(ctx context.Context, from, to time.Time, page func([][]byte) error) error {
	base := strings.TrimSuffix(s.Base, "/")
	if base == "" {
		base = StripeBase
	}
	after := ""
	seen := cursors{}
	for {
		q := url.Values{"limit": {"100"}, "created[gte]": {strconv.FormatInt(from.Unix(), 10)}}
		if !to.IsZero() {
			q.Set("created[lte]", strconv.FormatInt(to.Unix(), 10))
		}
		if after != "" {
			q.Set("starting_after", after)
		}
		u := base + "/v1/events?" + q.Encode()
		resp, err := s.do(ctx, "Stripe", func() (*http.Request, error) {
			req, err := http.NewRequest(http.MethodGet, u, nil)
			if err != nil {
				return nil, fmt.Errorf("stripe API: api_base: %w", err)
			}
			req.Header.Set("Authorization", "Bearer "+s.Key)
			return req, nil
		}, noHint, errorMessage)
		if err != nil {
			return err
		}
		var l stripeList
		err = s.decode(resp, &l)
		if err != nil || l.Object != "list" {
			return fmt.Errorf("stripe API: GET /v1/events did not answer a list: %v", err)
		}
		bodies := make([][]byte, len(l.Data))
		for i, d := range l.Data {
			bodies[i] = d
		}
		if err := page(bodies); err != nil {
			return err
		}
		if !l.HasMore || len(l.Data) == 0 {
			return nil
		}
		var last struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(l.Data[len(l.Data)-1], &last); err != nil || last.ID == "" {
			return fmt.Errorf("stripe API: an event without an id: %v", err)
		}
		if err := seen.next("stripe", last.ID); err != nil {
			return err
		}
		after = last.ID
	}
}
