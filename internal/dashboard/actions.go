package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/auth"
)

// apiResult is the answer of an in-process admin API call.
type apiResult struct {
	status int
	header http.Header
	body   bytes.Buffer
}

func (a *apiResult) Header() http.Header { return a.header }
func (a *apiResult) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}
func (a *apiResult) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

// ok reports a 2xx answer.
func (a *apiResult) ok() bool { return a.status >= 200 && a.status < 300 }

// message is the API's error message, or a generic one.
func (a *apiResult) message() string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(a.body.Bytes(), &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return fmt.Sprintf("the admin API answered %d", a.status)
}

// callAPI sends one request to the admin API in-process, as the principal
// of r's session (requireSession put it in r's context), which the API
// authorizes as it would the token: the API records the token's name and
// the session as the actor of what it does (admin.WithActor).
func (d *Dashboard) callAPI(r *http.Request, method, path string, body any, out any) (*apiResult, error) {
	var rd bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&rd).Encode(body); err != nil {
			return nil, err
		}
	}
	p, ok := auth.FromContext(r.Context())
	if !ok {
		p = auth.Principal{} // no session: the API refuses
	}
	ctx := auth.WithPrincipal(admin.WithActor(r.Context(), d.sessions.actor(r)), p)
	req, err := http.NewRequestWithContext(ctx, method, path, &rd)
	if err != nil {
		return nil, err
	}
	req.RemoteAddr = r.RemoteAddr
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "AnyHook dashboard")
	res := &apiResult{header: http.Header{}}
	d.opt.API.ServeHTTP(res, req)
	if res.status == 0 {
		res.status = http.StatusOK
	}
	if res.ok() && out != nil {
		if err := json.Unmarshal(res.body.Bytes(), out); err != nil {
			return res, fmt.Errorf("reading the admin API's answer to %s %s: %w", method, path, err)
		}
	}
	return res, nil
}

// back redirects to the page the action was posted from (the form's
// "back" field, a local path), else to fallback.
func back(w http.ResponseWriter, r *http.Request, fallback string) {
	to := r.PostForm.Get("back")
	if to == "" {
		to = fallback
	}
	http.Redirect(w, r, localPath(to), http.StatusSeeOther)
}

func parseForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		return &pageError{http.StatusBadRequest, "unreadable form"}
	}
	return nil
}

// POST /events/{id}/replay destination=…
func (d *Dashboard) replayEvent(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	id := r.PathValue("id")
	dest := strings.TrimSpace(r.PostForm.Get("destination"))
	var out struct {
		Deliveries []struct {
			Destination string `json:"destination"`
		} `json:"deliveries"`
	}
	res, err := d.callAPI(r, "POST", "/api/events/"+url.PathEscape(id)+"/replay",
		map[string]string{"destination": dest, "reason": r.PostForm.Get("reason")}, &out)
	if err != nil {
		return err
	}
	if !res.ok() {
		setFlash(w, r, true, "Replay failed: "+res.message())
	} else {
		var names []string
		for _, x := range out.Deliveries {
			names = append(names, x.Destination)
		}
		setFlash(w, r, false, "Replay queued to "+strings.Join(names, ", ")+".")
	}
	back(w, r, "/events/"+url.PathEscape(id))
	return nil
}

var actionNames = map[string]string{
	"resend":         "resent",
	"mark_delivered": "marked delivered",
	"discard":        "discarded",
}

// POST /deliveries/{id}/resolve action=…
func (d *Dashboard) resolve(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	id := r.PathValue("id")
	action := r.PostForm.Get("action")
	res, err := d.callAPI(r, "POST", "/api/deliveries/"+url.PathEscape(id)+"/resolve",
		map[string]string{"action": action, "reason": r.PostForm.Get("reason")}, nil)
	if err != nil {
		return err
	}
	if !res.ok() {
		setFlash(w, r, true, "Delivery "+id+": "+res.message())
	} else {
		setFlash(w, r, false, "Delivery "+id+" "+actionNames[action]+".")
	}
	back(w, r, "/deliveries?status=held")
	return nil
}

// POST /deliveries/resolve action=…&id=…&id=…
func (d *Dashboard) resolveMany(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	action := r.PostForm.Get("action")
	ids := r.PostForm["id"]
	if len(ids) == 0 {
		setFlash(w, r, true, "Select at least one delivery first.")
		back(w, r, "/deliveries?status=held")
		return nil
	}
	if len(ids) > 500 {
		return &pageError{http.StatusBadRequest, "at most 500 deliveries at once"}
	}
	done, failed := 0, []string{}
	for _, id := range ids {
		res, err := d.callAPI(r, "POST", "/api/deliveries/"+url.PathEscape(id)+"/resolve",
			map[string]string{"action": action, "reason": r.PostForm.Get("reason")}, nil)
		if err != nil {
			return err
		}
		if res.ok() {
			done++
		} else if len(failed) < 5 {
			failed = append(failed, id+": "+res.message())
		}
	}
	msg := fmt.Sprintf("%d of %s %s.", done, count(len(ids), "delivery", "deliveries"), actionNames[action])
	if len(failed) > 0 {
		msg += " Failed: " + strings.Join(failed, "; ")
	}
	setFlash(w, r, done < len(ids), msg)
	back(w, r, "/deliveries?status=held")
	return nil
}

// POST /replay status=dead&destination=…&source=…[&filter=&since=&until=&dry_run=on]
//
// Replays by filter through POST /api/replay: every selected delivery
// gets a new replay delivery.
func (d *Dashboard) bulkReplay(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	req := map[string]any{
		"status":      r.PostForm.Get("status"),
		"destination": r.PostForm.Get("destination"),
		"source":      r.PostForm.Get("source"),
		"reason":      r.PostForm.Get("reason"),
		// The page's confirmation named the paused and failing
		// destinations the replay sends into; a yes is the API's force.
		"force": r.PostForm.Get("force") == "on",
	}
	// The events page's filter: search offers a replay of what it looked
	// at: the events its filter accepts, received in the search's window;
	// a dry run first.
	filter := strings.TrimSpace(r.PostForm.Get("filter"))
	dry := r.PostForm.Get("dry_run") == "on"
	if filter != "" {
		req["filter"], req["since"], req["until"], req["dry_run"] = filter, r.PostForm.Get("since"), r.PostForm.Get("until"), dry
	}
	var out struct {
		Count   int `json:"count"`
		Matched int `json:"matched_events"`
		Skipped []struct {
			EventID string `json:"event_id"`
		} `json:"skipped"`
	}
	res, err := d.callAPI(r, "POST", "/api/replay", req, &out)
	if err != nil {
		return err
	}
	if !res.ok() {
		setFlash(w, r, true, "Bulk replay failed: "+res.message())
	} else if dry && filter != "" {
		setFlash(w, r, false, fmt.Sprintf("Dry run: the filter matches %s; a replay would queue %s (%s skipped: body pruned).",
			count(out.Matched, "event", "events"), count(out.Count, "delivery", "deliveries"), count(len(out.Skipped), "event", "events")))
	} else {
		msg := fmt.Sprintf("Replay queued for %s.", count(out.Count, "delivery", "deliveries"))
		if n := len(out.Skipped); n > 0 {
			ids := make([]string, 0, min(n, 5))
			for _, s := range out.Skipped[:min(n, 5)] {
				ids = append(ids, s.EventID)
			}
			more := ""
			if n > 5 {
				more = fmt.Sprintf(" and %d more", n-5)
			}
			msg += fmt.Sprintf(" Skipped %s whose body retention pruned (it can no longer be sent): %s%s.",
				count(n, "event", "events"), strings.Join(ids, ", "), more)
		}
		setFlash(w, r, out.Count == 0 && len(out.Skipped) > 0, msg)
	}
	back(w, r, "/deliveries?status=dead")
	return nil
}

// POST /destinations/{name}/pause|resume
func (d *Dashboard) setPaused(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	name, action := r.PathValue("name"), r.PathValue("action")
	if action == "discard" {
		return d.discardDestination(w, r, name)
	}
	if action != "pause" && action != "resume" {
		return &pageError{http.StatusNotFound, "no such action: " + action}
	}
	res, err := d.callAPI(r, "POST", "/api/destinations/"+url.PathEscape(name)+"/"+action, nil, nil)
	if err != nil {
		return err
	}
	if !res.ok() {
		setFlash(w, r, true, "Destination "+name+": "+res.message())
	} else {
		setFlash(w, r, false, "Destination "+name+" "+map[string]string{"pause": "paused", "resume": "resumed"}[action]+".")
	}
	back(w, r, "/destinations")
	return nil
}

// POST /destinations/{name}/discard reason=…: an orphaned destination's
// waiting deliveries, through POST /api/destinations/{name}/discard.
func (d *Dashboard) discardDestination(w http.ResponseWriter, r *http.Request, name string) error {
	var out struct {
		Count int `json:"count"`
	}
	res, err := d.callAPI(r, "POST", "/api/destinations/"+url.PathEscape(name)+"/discard",
		map[string]string{"reason": r.PostForm.Get("reason")}, &out)
	if err != nil {
		return err
	}
	if !res.ok() {
		setFlash(w, r, true, "Destination "+name+": "+res.message())
	} else {
		setFlash(w, r, false, fmt.Sprintf("Destination %s: discarded %s.", name, count(out.Count, "delivery", "deliveries")))
	}
	back(w, r, "/destinations")
	return nil
}
