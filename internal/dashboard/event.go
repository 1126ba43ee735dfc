package dashboard

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

type headerLine struct {
	Name  string
	Value string
}

type attemptView struct {
	anyhook.Attempt
	Response         string
	ResponseEncoding string
}

type deliveryView struct {
	anyhook.Delivery
	Attempts []attemptView
	InFlight *inFlightView // a claim whose attempt has no outcome yet
	// Breaker is its destination's breaker while tripped (auto_pause):
	// why a paused delivery waits.
	Breaker *store.Breaker
}

// inFlightView is a claimed delivery's current attempt: when it started,
// when its lease ends, and what happens then if no outcome is recorded
// (the worker died or stalled).
type inFlightView struct {
	Number     int
	Since      time.Time
	LeaseUntil time.Time
	Expired    bool   // the lease has ended: the rescuer acts on its next pass
	Then       string // what the rescuer will do
}

// inFlight is d's claimed attempt, nil unless d is delivering.
func (d *Dashboard) inFlight(dl anyhook.Delivery) *inFlightView {
	if dl.Status != anyhook.StatusDelivering {
		return nil
	}
	v := &inFlightView{Number: dl.AttemptCount, Since: dl.ClaimedAt, LeaseUntil: dl.LeaseUntil, Expired: !dl.LeaseUntil.After(d.now())}
	when := "If no outcome is recorded by then (its worker died or stalled), "
	if v.Expired {
		when = "The rescuer acts on its next pass: "
	}
	rule, ok := d.opt.StaleRules[dl.Destination]
	switch {
	case !ok:
		v.Then = when + "nothing happens until a gateway whose config names " + dl.Destination + " rescues it (its on_stale_claim decides)."
	case store.RescueStatus(dl, rule) == anyhook.StatusHeld:
		v.Then = when + "it is held for a person (on_stale_claim: hold): not sent again until someone resends it."
	case store.RescueStatus(dl, rule) == anyhook.StatusDead:
		v.Then = when + fmt.Sprintf("it goes dead: attempt %d was its last (max_attempts %d).", dl.AttemptCount, rule.MaxAttempts)
	default:
		v.Then = when + fmt.Sprintf("it is sent again as attempt %d (on_stale_claim: reclaim): the handler may see it twice.", dl.AttemptCount+1)
	}
	return v
}

// destSummary is what happened to an event at one destination, counted
// from its deliveries and their attempts: how often it was tried, how,
// how often nothing answered, and how often the destination answered 2xx.
type destSummary struct {
	Destination string
	Sent        int // attempts started, over the delivery and its replays
	Original    int // attempts of the delivery made at ingest
	Replays     int // replay deliveries
	Replayed    int // attempts of the replay deliveries
	Outcomes    anyhook.OutcomeCounts
	InFlight    int // attempts started whose outcome is not recorded yet
	OK          int // attempts answered 2xx
	Marked      int // deliveries a person marked delivered
	Skipped     bool
}

func summarize(ds []anyhook.Delivery) []destSummary {
	var out []destSummary
	at := map[string]int{}
	for _, d := range ds {
		i, ok := at[d.Destination]
		if !ok {
			i = len(out)
			at[d.Destination] = i
			out = append(out, destSummary{Destination: d.Destination})
		}
		s := &out[i]
		s.Sent += d.AttemptCount
		if d.Replay {
			s.Replays++
			s.Replayed += d.AttemptCount
		} else {
			s.Original += d.AttemptCount
		}
		if d.Status == anyhook.StatusSkipped {
			s.Skipped = true
		}
		if d.Resolution.Kind == anyhook.ResolvedMarkedDelivered {
			s.Marked++
		}
		if d.Status == anyhook.StatusDelivering {
			s.InFlight += d.AttemptCount - len(d.Attempts)
		}
		for _, a := range d.Attempts {
			s.Outcomes.Add(a)
			if a.StatusCode >= 200 && a.StatusCode < 300 {
				s.OK++
			}
		}
	}
	slices.SortFunc(out, func(a, b destSummary) int { return cmp.Compare(a.Destination, b.Destination) })
	return out
}

// actionView is one entry of the event's audit trail.
type actionView struct {
	anyhook.Action
	What string
}

type eventData struct {
	Event        anyhook.Event
	Headers      []headerLine
	Body         string
	BodyEncoding string
	Pretty       string // the body as indented JSON, when it is JSON
	ReplayTo     []string
	Deliveries   []deliveryView
	Summaries    []destSummary
	Actions      []actionView
	Back         string
	Arrived      arrivedView
	CanAct       bool // the session may act: replay, resolve
}

// encodeBytes is b as text: itself when valid UTF-8, else base64, as the
// admin API shows bodies.
func encodeBytes(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), "utf-8"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// GET /events/{id}
func (d *Dashboard) event(w http.ResponseWriter, r *http.Request) error {
	ev, err := d.opt.Store.Event(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	data := eventData{Event: ev, Back: r.URL.RequestURI(), Arrived: arrivedOf(ev), CanAct: canAct(r)}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range ev.Header {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range ev.Header[name] {
			data.Headers = append(data.Headers, headerLine{name, v})
		}
	}
	data.Body, data.BodyEncoding = encodeBytes(ev.Body)
	if data.BodyEncoding == "utf-8" && json.Valid(ev.Body) {
		var buf bytes.Buffer
		if json.Indent(&buf, ev.Body, "", "  ") == nil && buf.String() != data.Body {
			data.Pretty = buf.String()
		}
	}
	targets := slices.Clone(d.opt.Sources[ev.Source])
	for _, dl := range ev.Deliveries {
		if !slices.Contains(targets, dl.Destination) && slices.Contains(d.dests, dl.Destination) {
			targets = append(targets, dl.Destination)
		}
	}
	slices.Sort(targets)
	data.ReplayTo = targets
	if err := store.FillWaitsBehind(r.Context(), d.opt.Store, ev.Deliveries, d.inOrder); err != nil {
		return err
	}
	breakers, err := d.opt.Store.Breakers(r.Context())
	if err != nil {
		return err
	}
	for _, dl := range ev.Deliveries {
		v := deliveryView{Delivery: dl, InFlight: d.inFlight(dl)}
		if b, ok := breakers[dl.Destination]; ok {
			v.Breaker = &b
		}
		for _, a := range dl.Attempts {
			body, enc := encodeBytes(a.ResponseBody)
			v.Attempts = append(v.Attempts, attemptView{Attempt: a, Response: body, ResponseEncoding: enc})
		}
		data.Deliveries = append(data.Deliveries, v)
	}
	data.Summaries = summarize(ev.Deliveries)
	for _, a := range ev.Actions {
		what := map[string]string{store.ActionReplay: "replayed to " + a.Destination, store.ActionResend: "resent",
			store.ActionMarkDelivered: "marked delivered", store.ActionDiscard: "discarded"}[a.Kind]
		data.Actions = append(data.Actions, actionView{Action: a, What: cmp.Or(what, a.Kind)})
	}
	d.render(w, r, http.StatusOK, "event", "Event "+ev.ID, data)
	return nil
}
