package admin

import (
	"encoding/base64"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// The JSON shapes of SPEC §9. Field names are part of the contract.

type eventJSON struct {
	ID       string `json:"id"`
	Source   string `json:"source"`
	DedupKey string `json:"dedup_key"`
	Type     string `json:"type"` // the provider's event type; "" when none
	// Origin is how the event reached the gateway: webhook, or backfill
	// (read from the provider's API after an outage).
	Origin string `json:"origin"`
	// NotRouted are the destinations of the source that a filter kept the
	// event from: they have no delivery of it.
	NotRouted  []notRoutedJSON `json:"not_routed"`
	ReceivedAt time.Time       `json:"received_at"`
	Duplicates int64           `json:"duplicates"`
	Stale      bool            `json:"stale"`
	Object     string          `json:"object"`
	Version    string          `json:"version"`
	Request    requestJSON     `json:"request"`
	// RemoteAddr is the address the request came from ("" when not
	// recorded); Verification is what was checked before recording it.
	RemoteAddr   string           `json:"remote_addr"`
	Verification verificationJSON `json:"verification"`
	// Arrivals and Deliveries are present on GET /api/events/{id}, absent
	// from lists.
	Arrivals   *arrivalsJSON  `json:"arrivals,omitzero"`
	Deliveries []deliveryJSON `json:"deliveries,omitzero"`
	// Actions (GET /api/events/{id}) are what people did to the
	// deliveries, oldest first: the audit trail.
	Actions []actionJSON `json:"actions,omitzero"`
}

// notRoutedJSON is a destination an event was not routed to, and why.
type notRoutedJSON struct {
	Destination string `json:"destination"`
	Reason      string `json:"reason"` // filter: the destination's filter was false or failed
}

// actionJSON is one entry of an event's audit trail.
type actionJSON struct {
	ID          string    `json:"id"`
	Action      string    `json:"action"` // replay, resend, mark_delivered, discard
	DeliveryID  string    `json:"delivery_id"`
	Destination string    `json:"destination"`
	Actor       string    `json:"actor"`
	Reason      string    `json:"reason"`
	At          time.Time `json:"at"`
	// Resolved lists the held or dead deliveries the action took out of
	// their queue: for a replay, those its delivery took over.
	Resolved []string `json:"resolved"`
}

// resolutionJSON is how a person resolved a delivery.
type resolutionJSON struct {
	Kind             string    `json:"kind"` // replayed, discarded, marked_delivered
	At               time.Time `json:"at"`
	By               string    `json:"by"`
	Reason           string    `json:"reason"`
	ReplayDeliveryID string    `json:"replay_delivery_id,omitzero"`
}

type requestJSON struct {
	Method  string      `json:"method"`
	Path    string      `json:"path"`
	Headers http.Header `json:"headers"`
	// Body and BodyEncoding are absent from list items; BodySize is always
	// there.
	Body         *string `json:"body,omitzero"`
	BodyEncoding string  `json:"body_encoding,omitzero"`
	BodySize     int     `json:"body_size"`
	// BodyPruned is true (on a full event) once retention emptied the body.
	BodyPruned bool `json:"body_pruned,omitzero"`
}

type deliveryJSON struct {
	ID            string     `json:"id"`
	EventID       string     `json:"event_id"`
	Destination   string     `json:"destination"`
	Status        string     `json:"status"`
	Replay        bool       `json:"replay"`
	Stale         bool       `json:"stale"`
	AttemptCount  int        `json:"attempt_count"`
	NextAttemptAt *time.Time `json:"next_attempt_at"` // null unless pending or paused
	LeaseUntil    *time.Time `json:"lease_until,omitzero"`
	ClaimedAt     *time.Time `json:"claimed_at,omitzero"` // when the latest attempt started
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	Note          string     `json:"note"`
	// Resolution is how a person took it out of the held or dead queue;
	// null while nobody has.
	Resolution *resolutionJSON `json:"resolution"`
	// Orphaned: the destination is not in this gateway's config (removed,
	// or not yet added during a rolling change). Its deliveries wait,
	// untouched, until a config names it again.
	Orphaned bool `json:"orphaned"`
	// WaitsBehind is, for a pending delivery to a destination with order:
	// per_object, the delivery of its object it waits behind; absent
	// otherwise.
	WaitsBehind *waitsBehindJSON `json:"waits_behind,omitzero"`
	// Attempts is present in an event's deliveries, absent from lists.
	Attempts []attemptJSON `json:"attempts,omitzero"`
}

type waitsBehindJSON struct {
	DeliveryID string `json:"delivery_id"`
	EventID    string `json:"event_id"`
	Version    string `json:"version,omitempty"`
}

type attemptJSON struct {
	Number               int       `json:"number"`
	StartedAt            time.Time `json:"started_at"`
	DurationMS           float64   `json:"duration_ms"`
	StatusCode           int       `json:"status_code"`
	Error                string    `json:"error"`
	ResponseBody         string    `json:"response_body"`
	ResponseBodyEncoding string    `json:"response_body_encoding"`
	// Outcome is what the request came to: answered, no_answer (sent,
	// then a timeout or reset: the handler may have run), not_sent (the
	// handler did not run) or unknown (recorded before outcomes were
	// kept, or a claim a crash lost).
	Outcome string `json:"outcome"`
	// OutcomeUnknown: the claim expired before a result was recorded (the
	// worker crashed or stalled). started_at is when it was sent; its
	// duration is unknown (0).
	OutcomeUnknown bool `json:"outcome_unknown,omitzero"`
}

type listJSON[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// encodeBytes is b as a JSON string: itself when valid UTF-8, else base64.
func encodeBytes(b []byte) (s, encoding string) {
	if utf8.Valid(b) {
		return string(b), "utf-8"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

func utc(t time.Time) time.Time { return t.UTC() }

// toEvent converts ev; full adds the body and the deliveries with their
// attempts.
func (a *API) toEvent(ev anyhook.Event, full bool) eventJSON {
	h := ev.Header
	if h == nil {
		h = http.Header{}
	}
	out := eventJSON{
		ID: ev.ID, Source: ev.Source, DedupKey: ev.DedupKey, Type: ev.Type, Origin: ev.Origin, NotRouted: []notRoutedJSON{}, ReceivedAt: utc(ev.ReceivedAt),
		Duplicates: ev.Duplicates, Stale: ev.Stale, Object: ev.Object, Version: ev.Version,
		Request:    requestJSON{Method: ev.Method, Path: ev.Path, Headers: h, BodySize: len(ev.Body)},
		RemoteAddr: ev.RemoteAddr, Verification: toVerification(ev.Verification),
	}
	for _, d := range ev.NotRouted {
		out.NotRouted = append(out.NotRouted, notRoutedJSON{Destination: d, Reason: "filter"})
	}
	if full {
		out.Arrivals = toArrivals(ev)
		body, enc := encodeBytes(ev.Body)
		out.Request.Body, out.Request.BodyEncoding = &body, enc
		out.Request.BodyPruned = ev.BodyPruned
		out.Deliveries = make([]deliveryJSON, 0, len(ev.Deliveries))
		for _, d := range ev.Deliveries {
			out.Deliveries = append(out.Deliveries, a.toDelivery(d, true))
		}
		out.Actions = make([]actionJSON, 0, len(ev.Actions))
		for _, x := range ev.Actions {
			aj := actionJSON{ID: x.ID, Action: x.Kind, DeliveryID: x.DeliveryID, Destination: x.Destination,
				Actor: x.Actor, Reason: x.Reason, At: utc(x.At), Resolved: []string{}}
			for _, d := range ev.Deliveries {
				switch {
				case x.Kind == store.ActionReplay && d.Resolution.ReplayedBy == x.DeliveryID,
					(x.Kind == store.ActionDiscard || x.Kind == store.ActionMarkDelivered) && d.ID == x.DeliveryID:
					aj.Resolved = append(aj.Resolved, d.ID)
				}
			}
			out.Actions = append(out.Actions, aj)
		}
	}
	return out
}

// toDelivery converts d; full adds its attempts.
func (a *API) toDelivery(d anyhook.Delivery, full bool) deliveryJSON {
	out := deliveryJSON{
		ID: d.ID, EventID: d.EventID, Destination: d.Destination, Status: string(d.Status),
		Replay: d.Replay, Stale: d.Stale, AttemptCount: d.AttemptCount,
		CreatedAt: utc(d.CreatedAt), UpdatedAt: utc(d.UpdatedAt), Note: d.Note,
		Orphaned: !a.known[d.Destination],
	}
	if d.Status.Waiting() && !d.NextAttemptAt.IsZero() {
		t := utc(d.NextAttemptAt)
		out.NextAttemptAt = &t
	}
	if d.Status == anyhook.StatusDelivering && !d.LeaseUntil.IsZero() {
		t := utc(d.LeaseUntil)
		out.LeaseUntil = &t
	}
	if !d.ClaimedAt.IsZero() {
		t := utc(d.ClaimedAt)
		out.ClaimedAt = &t
	}
	if d.WaitsBehind != "" {
		out.WaitsBehind = &waitsBehindJSON{DeliveryID: d.WaitsBehind, EventID: d.WaitsBehindEvent, Version: d.WaitsBehindVersion}
	}
	if r := d.Resolution; r.Kind != "" {
		out.Resolution = &resolutionJSON{Kind: r.Kind, At: utc(r.At), By: r.By, Reason: r.Reason, ReplayDeliveryID: r.ReplayedBy}
	}
	if full {
		out.Attempts = make([]attemptJSON, 0, len(d.Attempts))
		for _, at := range d.Attempts {
			body, enc := encodeBytes(at.ResponseBody)
			out.Attempts = append(out.Attempts, attemptJSON{
				Number: at.Number, StartedAt: utc(at.StartedAt),
				DurationMS: float64(at.Duration.Microseconds()) / 1000,
				StatusCode: at.StatusCode, Error: at.Error,
				ResponseBody: body, ResponseBodyEncoding: enc,
				Outcome: store.OutcomeOf(at), OutcomeUnknown: store.Lost(at),
			})
		}
	}
	return out
}
