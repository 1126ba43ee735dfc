package store

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

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
// hold holds it.
func RescueStatus(d anyhook.Delivery, rule StaleRule) anyhook.DeliveryStatus {
	if rule.Policy == anyhook.Hold {
		return anyhook.StatusHeld
	}
	if rule.MaxAttempts > 0 && d.AttemptCount >= rule.MaxAttempts {
		return anyhook.StatusDead
	}
	return anyhook.StatusPending
}

// LostAttempt is the attempt record left for a claim that expired: it was
// started, but nobody knows whether the destination got it.
func LostAttempt(d anyhook.Delivery) anyhook.Attempt {
	started := d.UpdatedAt
	return anyhook.Attempt{
		Number:    d.AttemptCount,
		StartedAt: started,
		Error:     "outcome unknown: the claim expired before a result was recorded (worker crashed or stalled)",
	}
}

// Resolution is the status and note of d after a person's action.
func Resolution(d anyhook.Delivery, action string, now time.Time) (anyhook.DeliveryStatus, string, error) {
	if d.Status != anyhook.StatusHeld && d.Status != anyhook.StatusDead {
		return "", "", fmt.Errorf("delivery %s is %s; only held or dead deliveries can be resolved: %w", d.ID, d.Status, anyhook.ErrInvalid)
	}
	stamp := now.UTC().Format(time.RFC3339)
	switch action {
	case ActionResend:
		return anyhook.StatusPending, "resent by an operator at " + stamp, nil
	case ActionMarkDelivered:
		return anyhook.StatusDelivered, "marked delivered by an operator at " + stamp, nil
	case ActionDiscard:
		return anyhook.StatusDead, DiscardedNote + stamp, nil
	}
	return "", "", fmt.Errorf("unknown action %q (want resend, mark_delivered or discard): %w", action, anyhook.ErrInvalid)
}

// DiscardedNote starts the note of a delivery an operator discarded (it
// stays dead): unlike a delivery that died on its own, it no longer keeps
// its event's body from retention.
const DiscardedNote = "discarded by an operator at "

// NeedsBody is the SQL condition (the same in both dialects) on a delivery
// d that still needs its event's body: one that is unfinished (pending,
// delivering, paused), held for a person, or dead and not discarded, so a
// person may still resend or replay it. Retention never prunes the body of
// an event with such a delivery (Ledger.PruneBodies), and log verification
// reports a pruned body that one still needs.
const NeedsBody = `(d.status IN ('pending', 'delivering', 'paused', 'held') OR (d.status = 'dead' AND d.note NOT LIKE '` + DiscardedNote + `%'))`

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
