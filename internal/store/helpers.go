package store

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/anyhook/anyhook"
)

// NewID returns a new UUIDv7: unique, and ordered by creation time, so
// ordering by id is ordering by age.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// EncodeHeader encodes h for storage exactly as received, in the wire
// form "Name: value\r\n" per value, names sorted. Unlike JSON it keeps
// bytes that are not UTF-8 (HTTP allows them in values); values cannot hold
// CR or LF, which HTTP forbids and net/http rejects.
func EncodeHeader(h http.Header) ([]byte, error) {
	b := bytes.NewBuffer([]byte{}) // never nil: the column is NOT NULL
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if strings.ContainsAny(k, ":\r\n") {
			return nil, fmt.Errorf("header name %q cannot be stored: %w", k, anyhook.ErrInvalid)
		}
		for _, v := range h[k] {
			if strings.ContainsAny(v, "\r\n") {
				return nil, fmt.Errorf("header %s has a line break: %w", k, anyhook.ErrInvalid)
			}
			b.WriteString(k)
			b.WriteString(": ")
			b.WriteString(v)
			b.WriteString("\r\n")
		}
	}
	return b.Bytes(), nil
}

// DecodeHeader reverses EncodeHeader.
func DecodeHeader(b []byte) (http.Header, error) {
	h := http.Header{}
	for line := range strings.SplitSeq(string(b), "\r\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, fmt.Errorf("stored header line %q is malformed", line)
		}
		h[k] = append(h[k], v)
	}
	return h, nil
}

// RescueStatus is the new status of d, whose claim expired, under rule:
// reclaim makes it pending again unless its attempts are used up (dead);
// hold holds it. Probes (auto_pause) do not count towards the attempts.
func RescueStatus(d anyhook.Delivery, rule StaleRule) anyhook.DeliveryStatus {
	if rule.Policy == anyhook.Hold {
		return anyhook.StatusHeld
	}
	if rule.MaxAttempts > 0 && d.AttemptCount-d.Probes >= rule.MaxAttempts {
		return anyhook.StatusDead
	}
	return anyhook.StatusPending
}

// LostError is the error of an attempt whose claim expired before its
// outcome was recorded.
const LostError = "outcome unknown: the claim expired before a result was recorded (worker crashed or stalled)"

// Lost reports whether a is the record of an attempt whose claim expired
// before its outcome was recorded (LostAttempt).
func Lost(a anyhook.Attempt) bool { return a.Error == LostError }

// LostAttempt is the attempt record left for a claim that expired: it was
// started when it was claimed, but nobody knows whether the destination
// got it, or how long it took. d is the delivery as its claim left it.
func LostAttempt(d anyhook.Delivery) anyhook.Attempt {
	started := d.ClaimedAt
	if started.IsZero() {
		started = d.UpdatedAt // claimed before claimed_at was recorded (migration 6): the claim's own write
	}
	return anyhook.Attempt{Number: d.AttemptCount, StartedAt: started, Error: LostError}
}

// CheckReason validates the optional reason of a replay or resolve: one
// line of at most MaxReason bytes of UTF-8, without control characters
// (PostgreSQL's text would refuse other bytes that SQLite keeps). It returns
// it trimmed; the error says what is wrong, for the caller to prefix with
// where the reason came from.
func CheckReason(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxReason {
		return "", fmt.Errorf("%d bytes; at most %d: %w", len(s), MaxReason, anyhook.ErrInvalid)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("must be one line of text, without control characters: %w", anyhook.ErrInvalid)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("must be UTF-8 text: %w", anyhook.ErrInvalid)
	}
	return s, nil
}

// ActorName is the actor recorded for by.
func ActorName(by Actor) string {
	if by.Name == "" {
		return "unknown"
	}
	return by.Name
}

// Resolved returns d after a person's action (Action* but replay) at now:
// its new status, note and resolution, due now. Only a held or dead
// delivery can be resolved, with a known action (else ErrInvalid).
func Resolved(d anyhook.Delivery, action string, by Actor, now time.Time) (anyhook.Delivery, error) {
	if d.Status != anyhook.StatusHeld && d.Status != anyhook.StatusDead {
		return d, fmt.Errorf("delivery %s is %s; only held or dead deliveries can be resolved: %w", d.ID, d.Status, anyhook.ErrInvalid)
	}
	var verb string
	switch action {
	case ActionResend:
		d.Status, verb = anyhook.StatusPending, "resent"
	case ActionMarkDelivered:
		d.Status, verb = anyhook.StatusDelivered, "marked delivered"
		d.Resolution = anyhook.Resolution{Kind: anyhook.ResolvedMarkedDelivered}
	case ActionDiscard:
		d.Status, verb = anyhook.StatusResolved, "discarded"
		d.Resolution = anyhook.Resolution{Kind: anyhook.ResolvedDiscarded}
	default:
		return d, fmt.Errorf("unknown action %q (want resend, mark_delivered or discard): %w", action, anyhook.ErrInvalid)
	}
	if d.Resolution.Kind != "" {
		d.Resolution.At, d.Resolution.By, d.Resolution.Reason = now, ActorName(by), by.Reason
	}
	d.Note = Note(verb, by, now)
	d.NextAttemptAt, d.LeaseUntil, d.UpdatedAt = now, time.Time{}, now
	return d, nil
}

// Note is the line a delivery's note gets for a person's action: what,
// by whom, when, and why when a reason was given.
func Note(verb string, by Actor, now time.Time) string {
	n := verb + " by " + ActorName(by) + " at " + now.UTC().Format(time.RFC3339)
	if by.Reason != "" {
		n += ": " + by.Reason
	}
	return n
}

// PrunedError is the refusal to send event id again because retention
// emptied its body.
func PrunedError(id string) error {
	return fmt.Errorf("event %s: its body was pruned by retention (log.retention), so it can no longer be sent: %w", id, anyhook.ErrPruned)
}

// PrunedManyError refuses a bulk replay that selected n events whose
// bodies were pruned (first is one of them).
func PrunedManyError(n int, first string) error {
	return fmt.Errorf("%d of the selected events (e.g. %s) had their bodies pruned by retention (log.retention) and can no longer be sent; narrow the filter (since): %w", n, first, anyhook.ErrPruned)
}
