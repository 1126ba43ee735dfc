package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PaddleBase is Paddle Billing's API root (sandbox:
// https://sandbox-api.paddle.com).
const PaddleBase = "https://api.paddle.com"

// Paddle lists events through Paddle Billing's List events API
// (GET /events, the event stream of the last 90 days): per_page=200,
// order_by=id[DESC] (newest first: Paddle ids grow with time), and the
// after cursor, the last event id of a page, while meta.pagination
// has_more. The API has no time filter: paging stops at the first event
// older than the window.
type Paddle struct{ Client }

type paddleList struct {
	Data []json.RawMessage `json:"data"`
	Meta struct {
		Pagination struct {
			HasMore bool `json:"has_more"`
		} `json:"pagination"`
	} `json:"meta"`
}

// List implements Lister.
func (p *Paddle) List(ctx context.Context, from, to time.Time, page func([][]byte) error) error {
	base := strings.TrimSuffix(p.Base, "/")
	if base == "" {
		base = PaddleBase
	}
	after := ""
	seen := cursors{}
	for {
		q := url.Values{"per_page": {"200"}, "order_by": {"id[DESC]"}}
		if after != "" {
			q.Set("after", after)
		}
		u := base + "/events?" + q.Encode()
		resp, err := p.do(ctx, "Paddle", func() (*http.Request, error) {
			req, err := http.NewRequest(http.MethodGet, u, nil)
			if err != nil {
				return nil, fmt.Errorf("paddle API: api_base: %w", err)
			}
			req.Header.Set("Authorization", "Bearer "+p.Key)
			return req, nil
		}, noHint, errorMessage)
		if err != nil {
			return err
		}
		var l paddleList
		err = p.decode(resp, &l)
		if err != nil {
			return fmt.Errorf("paddle API: GET /events did not answer a list: %v", err)
		}
		var in [][]byte
		older := false
		for _, d := range l.Data {
			var ev struct {
				ID         string    `json:"event_id"`
				OccurredAt time.Time `json:"occurred_at"`
			}
			if err := json.Unmarshal(d, &ev); err != nil || ev.ID == "" || ev.OccurredAt.IsZero() {
				return fmt.Errorf("paddle API: an event without an event_id or occurred_at: %v", err)
			}
			after = ev.ID
			switch {
			case ev.OccurredAt.Before(from):
				older = true
			case to.IsZero() || !ev.OccurredAt.After(to):
				in = append(in, d)
			}
		}
		if err := page(in); err != nil {
			return err
		}
		if older || !l.Meta.Pagination.HasMore || len(l.Data) == 0 {
			return nil
		}
		if err := seen.next("paddle", after); err != nil {
			return err
		}
	}
}
