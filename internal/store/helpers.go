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
		return anyhook.StatusDead, "discarded by an operator at " + stamp, nil
	}
	return "", "", fmt.Errorf("unknown action %q (want resend, mark_delivered or discard): %w", action, anyhook.ErrInvalid)
}
