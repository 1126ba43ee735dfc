package backfilltest

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Paddle is a fake of Paddle Billing's List events API, GET /events
// (https://developer.paddle.com/api-reference/events/list-events): Bearer
// API key; per_page (default 50, at most 200: more is answered with 200);
// order_by id[ASC] or id[DESC] (the default); the after cursor (an event
// id); a {"data", "meta": {"request_id", "pagination": {"per_page",
// "next", "has_more", "estimated_total"}}} answer. Errors are
// {"error": {"type", "code", "detail", "documentation_url"}, "meta"}; a
// bad key is 403 forbidden, a rate limit 429 too_many_requests with
// Retry-After.
type Paddle struct {
	server
	Key string

	events []paddleEvent // oldest first; ids grow with time
}

type paddleEvent struct {
	id  string
	raw json.RawMessage
}

// NewPaddle starts the fake with the API key key.
func NewPaddle(t testing.TB, key string) *Paddle {
	p := &Paddle{Key: key}
	p.start(t, p.serve)
	return p
}

// Add records an event of type typ about entity id, occurred at at (later
// than every event added before), and returns its id and JSON.
func (p *Paddle) Add(typ, entityID string, at time.Time) (id string, body []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id = fmt.Sprintf("evt_01fake%020d", len(p.events)+1)
	body, _ = json.Marshal(map[string]any{
		"event_id": id, "event_type": typ, "occurred_at": at.UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
		"data": map[string]any{"id": entityID, "status": "completed", "items": []any{}},
	})
	p.events = append(p.events, paddleEvent{id: id, raw: body})
	return id, body
}

func paddleError(w http.ResponseWriter, code int, errCode, detail string) {
	typ := "request_error"
	if code == http.StatusTooManyRequests {
		typ = "api_error" // as Paddle's SDK knows too_many_requests
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]string{"type": typ, "code": errCode, "detail": detail,
			"documentation_url": "https://developer.paddle.com/v1/errors/shared/" + errCode},
		"meta": map[string]string{"request_id": "fake"},
	})
}

func (p *Paddle) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(p.Key)) != 1 {
		paddleError(w, http.StatusForbidden, "forbidden", "You aren't permitted to perform this request.")
		return
	}
	if p.limited[p.requests] {
		w.Header().Set("Retry-After", "1")
		paddleError(w, http.StatusTooManyRequests, "too_many_requests", "IP address exceeded the allowed rate limit. Retry after the number of seconds in the Retry-After header.")
		return
	}
	if r.URL.Path != "/events" || r.Method != http.MethodGet {
		paddleError(w, http.StatusNotFound, "not_found", "Entity not found")
		return
	}
	q := r.URL.Query()
	per := 50
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			paddleError(w, http.StatusBadRequest, "bad_request", "Invalid request: per_page")
			return
		}
		per = min(n, 200)
	}
	list := slices.Clone(p.events)
	switch q.Get("order_by") {
	case "", "id[DESC]":
		slices.Reverse(list)
	case "id[ASC]":
	default:
		paddleError(w, http.StatusBadRequest, "invalid_field", "order_by: invalid")
		return
	}
	if a := q.Get("after"); a != "" {
		i := slices.IndexFunc(list, func(e paddleEvent) bool { return e.id == a })
		if i < 0 {
			paddleError(w, http.StatusBadRequest, "invalid_field", "after: no such entity")
			return
		}
		list = list[i+1:]
	}
	total := len(list)
	more := len(list) > per
	if more {
		list = list[:per]
	}
	data := make([]json.RawMessage, len(list))
	next := ""
	for i, e := range list {
		data[i] = e.raw
		next = e.id
	}
	nq := r.URL.Query()
	nq.Set("after", next)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"data": data, "meta": map[string]any{"request_id": "fake",
		"pagination": map[string]any{"per_page": per, "next": "http://" + r.Host + "/events?" + nq.Encode(), "has_more": more, "estimated_total": total}}})
}
