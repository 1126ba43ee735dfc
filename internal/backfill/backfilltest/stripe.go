// Package backfilltest holds fakes of providers' APIs, on 127.0.0.1, that
// follow each provider's documented API (pagination, filters, errors, rate
// limits). Their shapes are checked by pointing the provider's own Go SDK
// at them (internal/backfill tests), so that a backfill tested against a
// fake works against the provider.
package backfilltest

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Stripe is a fake of Stripe's List all events API, GET /v1/events
// (https://docs.stripe.com/api/events/list): authentication by the secret
// key as a Bearer token or HTTP Basic user; limit (1–100, default 10);
// created as an integer or with [gt], [gte], [lt], [lte]; type and
// types[]; starting_after and ending_before cursors (an unknown one is 400
// resource_missing); newest first; a list object with has_more. A bad key
// is 401, as Stripe answers it; a rate limit 429 (code rate_limit).
type Stripe struct {
	server
	Key string

	events  []stripeEvent // in creation order
	queries []string
}

type stripeEvent struct {
	id, typ string
	created int64
	raw     json.RawMessage
}

// NewStripe starts the fake on 127.0.0.1 with the secret key key.
func NewStripe(t testing.TB, key string) *Stripe {
	s := &Stripe{Key: key}
	s.start(t, s.serve)
	return s
}

// Add records an event of type typ about object objectID, created at
// created, and returns its id and its JSON (as Stripe sends it in a
// webhook and lists it).
func (s *Stripe) Add(typ, objectID string, created time.Time) (id string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id = fmt.Sprintf("evt_fake%06d", len(s.events)+1)
	ev := map[string]any{
		"id": id, "object": "event", "api_version": "2025-11-17.clover", "created": created.Unix(),
		"data":     map[string]any{"object": map[string]any{"id": objectID, "object": strings.SplitN(typ, ".", 2)[0]}},
		"livemode": false, "pending_webhooks": 1,
		"request": map[string]any{"id": nil, "idempotency_key": nil},
		"type":    typ,
	}
	body, _ = json.MarshalIndent(ev, "", "  ")
	s.events = append(s.events, stripeEvent{id: id, typ: typ, created: created.Unix(), raw: body})
	return id, body
}

// Queries returns the query strings of the requests served so far.
func (s *Stripe) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

func stripeError(w http.ResponseWriter, code int, typ, errCode, msg, param string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	e := map[string]any{"type": typ, "message": msg}
	if errCode != "" {
		e["code"] = errCode
	}
	if param != "" {
		e["param"] = param
	}
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func (s *Stripe) authorized(r *http.Request) bool {
	got := ""
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		got = strings.TrimPrefix(a, "Bearer ")
	} else if u, _, ok := r.BasicAuth(); ok {
		got = u
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.Key)) == 1
}

func (s *Stripe) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.queries = append(s.queries, r.URL.RawQuery)
	if r.URL.Path != "/v1/events" || r.Method != http.MethodGet {
		stripeError(w, http.StatusNotFound, "invalid_request_error", "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+").", "")
		return
	}
	if !s.authorized(r) {
		msg := "You did not provide an API key."
		if r.Header.Get("Authorization") != "" {
			msg = "Invalid API Key provided: " + masked(r)
		}
		stripeError(w, http.StatusUnauthorized, "invalid_request_error", "", msg, "")
		return
	}
	if s.limited[s.requests] {
		stripeError(w, http.StatusTooManyRequests, "invalid_request_error", "rate_limit",
			"Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.", "")
		return
	}
	q := r.URL.Query()
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer",
				"Invalid integer: "+v+" (limit must be between 1 and 100)", "limit")
			return
		}
		limit = n
	}
	keep := func(e stripeEvent) bool { return true }
	for _, f := range []struct {
		param string
		ok    func(c, v int64) bool
	}{
		{"created", func(c, v int64) bool { return c == v }},
		{"created[gt]", func(c, v int64) bool { return c > v }},
		{"created[gte]", func(c, v int64) bool { return c >= v }},
		{"created[lt]", func(c, v int64) bool { return c < v }},
		{"created[lte]", func(c, v int64) bool { return c <= v }},
	} {
		v := q.Get(f.param)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer", "Invalid integer: "+v, f.param)
			return
		}
		prev, ok := keep, f.ok
		keep = func(e stripeEvent) bool { return prev(e) && ok(e.created, n) }
	}
	types := q["types[]"]
	if t := q.Get("type"); t != "" {
		if len(types) > 0 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "", "You may pass either `type` or `types`, but not both.", "type")
			return
		}
		types = []string{t}
	}
	if len(types) > 0 {
		prev := keep
		keep = func(e stripeEvent) bool {
			return prev(e) && slices.ContainsFunc(types, func(t string) bool { return typeMatches(t, e.typ) })
		}
	}
	// Newest first; among events of one second, the later-made first.
	var list []stripeEvent
	for i := len(s.events) - 1; i >= 0; i-- {
		if keep(s.events[i]) {
			list = append(list, s.events[i])
		}
	}
	slices.SortStableFunc(list, func(a, b stripeEvent) int { return int(b.created - a.created) })
	after, before := q.Get("starting_after"), q.Get("ending_before")
	if after != "" && before != "" {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "", "You may only specify one of these parameters: ending_before, starting_after.", "")
		return
	}
	from, to := 0, len(list)
	for _, c := range []struct{ param, id string }{{"starting_after", after}, {"ending_before", before}} {
		if c.id == "" {
			continue
		}
		i := slices.IndexFunc(list, func(e stripeEvent) bool { return e.id == c.id })
		if i < 0 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "resource_missing", "No such event: '"+c.id+"'", c.param)
			return
		}
		if c.param == "starting_after" {
			from = i + 1
		} else {
			to = i
		}
	}
	page := list[from:to]
	hasMore := len(page) > limit
	if hasMore {
		if before != "" {
			page = page[len(page)-limit:]
		} else {
			page = page[:limit]
		}
	}
	data := make([]json.RawMessage, len(page))
	for i, e := range page {
		data[i] = e.raw
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", fmt.Sprintf("req_fake%d", s.requests))
	b, _ := json.MarshalIndent(map[string]any{"object": "list", "data": data, "has_more": hasMore, "url": "/v1/events"}, "", "  ")
	w.Write(b)
}

// typeMatches is Stripe's type filter: a name, or a group with * as a
// wildcard.
func typeMatches(pattern, typ string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(typ, p)
	}
	return pattern == typ
}

// masked is the key a request sent, masked as Stripe masks it.
func masked(r *http.Request) string {
	k := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if strings.HasPrefix(r.Header.Get("Authorization"), "Basic ") {
		b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.Header.Get("Authorization"), "Basic "))
		k, _, _ = strings.Cut(string(b), ":")
	}
	if len(k) <= 4 {
		return "****"
	}
	prefix, _, _ := strings.Cut(k, "_")
	return prefix + "_****" + k[len(k)-4:]
}
