package backfilltest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// GitHub is a fake of GitHub's webhook deliveries API for one repository
// or organization hook (https://docs.github.com/en/rest/repos/webhooks,
// …/orgs/webhooks): GET {hook}/deliveries (per_page up to 100, default
// 30, newest first, paged by a cursor in the Link header's rel="next"),
// and POST {hook}/deliveries/{id}/attempts (202), which sends the event
// again to the hook's URL, signed with X-Hub-Signature-256 as GitHub
// does, and lists the attempt as a redelivery. Bearer token auth; a bad
// token is 401 "Bad credentials"; a rate limit 403 with
// x-ratelimit-remaining: 0, as GitHub's primary rate limit does.
type GitHub struct {
	server
	Token  string
	Hook   string // the hook's path: /repos/o/r/hooks/N or /orgs/o/hooks/N
	HookID int64

	// Target and Secret are the hook's payload URL and secret.
	Target, Secret string

	deliveries []ghDelivery // oldest first
	payloads   map[string][]byte
	events     map[string]string
}

type ghDelivery struct {
	ID          int64   `json:"id"`
	GUID        string  `json:"guid"`
	DeliveredAt string  `json:"delivered_at"`
	Redelivery  bool    `json:"redelivery"`
	Duration    float64 `json:"duration"`
	Status      string  `json:"status"`
	StatusCode  int     `json:"status_code"`
	Event       string  `json:"event"`
	Action      any     `json:"action"`
	InstallID   any     `json:"installation_id"`
	RepoID      any     `json:"repository_id"`
	ThrottledAt any     `json:"throttled_at"`
}

// NewGitHub starts the fake for the hook at hook (a repository's
// /repos/OWNER/NAME or an organization's /orgs/ORG), id hookID.
func NewGitHub(t testing.TB, token, owner string, hookID int64) *GitHub {
	g := &GitHub{Token: token, HookID: hookID, Hook: owner + "/hooks/" + strconv.FormatInt(hookID, 10),
		payloads: map[string][]byte{}, events: map[string]string{}}
	g.start(t, g.serve)
	return g
}

// Deliver records a delivery of a new event (GUID guid, event type event,
// payload body) at at with the status code the hook's URL answered.
func (g *GitHub) Deliver(guid, event string, body []byte, at time.Time, code int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.payloads[guid], g.events[guid] = body, event
	g.add(guid, event, at, code, false)
}

func (g *GitHub) add(guid, event string, at time.Time, code int, redelivery bool) {
	status := "OK"
	if code/100 != 2 {
		status = "Invalid HTTP Response: " + strconv.Itoa(code)
	}
	g.deliveries = append(g.deliveries, ghDelivery{ID: int64(len(g.deliveries) + 1000), GUID: guid, DeliveredAt: at.UTC().Format(time.RFC3339),
		Redelivery: redelivery, Duration: 0.1, Status: status, StatusCode: code, Event: event, RepoID: 1})
}

// Sign is the X-Hub-Signature-256 of body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Redeliveries returns the GUIDs redelivered so far.
func (g *GitHub) Redeliveries() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, d := range g.deliveries {
		if d.Redelivery {
			out = append(out, d.GUID)
		}
	}
	return out
}

func ghError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(code)})
}

func (g *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.requests++
	n := g.requests
	g.mu.Unlock()
	a := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(a, "Bearer ")
	if !ok {
		tok, ok = strings.CutPrefix(a, "token ")
	}
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(g.Token)) != 1 {
		ghError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	g.mu.Lock()
	limited := g.limited[n]
	g.mu.Unlock()
	if limited {
		w.Header().Set("X-Ratelimit-Limit", "5000")
		w.Header().Set("X-Ratelimit-Remaining", "0")
		w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(time.Now().Unix(), 10))
		ghError(w, http.StatusForbidden, "API rate limit exceeded for user ID 1.")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, g.Hook+"/deliveries")
	switch {
	case !ok:
		ghError(w, http.StatusNotFound, "Not Found")
	case rest == "" && r.Method == http.MethodGet:
		g.list(w, r)
	case strings.HasSuffix(rest, "/attempts") && r.Method == http.MethodPost:
		id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/attempts"), 10, 64)
		if err != nil {
			ghError(w, http.StatusNotFound, "Not Found")
			return
		}
		g.redeliver(w, id)
	default:
		ghError(w, http.StatusNotFound, "Not Found")
	}
}

func (g *GitHub) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	per := 30
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			ghError(w, http.StatusUnprocessableEntity, "Invalid request.\n\nInvalid per_page.")
			return
		}
		per = min(n, 100)
	}
	g.mu.Lock()
	all := slices.Clone(g.deliveries)
	g.mu.Unlock()
	slices.Reverse(all) // newest first
	from := 0
	if c := q.Get("cursor"); c != "" {
		id, err := strconv.ParseInt(strings.TrimPrefix(c, "v1_"), 10, 64)
		i := slices.IndexFunc(all, func(d ghDelivery) bool { return d.ID == id })
		if err != nil || i < 0 {
			ghError(w, http.StatusUnprocessableEntity, "Invalid cursor")
			return
		}
		from = i + 1
	}
	page := all[from:]
	if len(page) > per {
		page = page[:per]
		next := fmt.Sprintf("http://%s%s?per_page=%d&cursor=v1_%d", r.Host, r.URL.Path, per, page[len(page)-1].ID)
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(page)
}

// redeliver sends delivery id's event again to the hook's URL.
func (g *GitHub) redeliver(w http.ResponseWriter, id int64) {
	g.mu.Lock()
	i := slices.IndexFunc(g.deliveries, func(d ghDelivery) bool { return d.ID == id })
	if i < 0 {
		g.mu.Unlock()
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	guid := g.deliveries[i].GUID
	body, event := g.payloads[guid], g.events[guid]
	g.mu.Unlock()
	code := 0
	req, _ := http.NewRequest(http.MethodPost, g.Target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Hook-ID", strconv.FormatInt(g.HookID, 10))
	req.Header.Set("X-Hub-Signature-256", Sign(g.Secret, body))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		code = resp.StatusCode
		resp.Body.Close()
	}
	g.mu.Lock()
	g.add(guid, event, time.Now(), code, true)
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	w.Write([]byte("{}\n"))
}
