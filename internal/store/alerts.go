package store

import (
	"context"
	"time"
)

// Alert actions: what a message asks of its channel. A channel with
// incidents (PagerDuty) opens or updates one by its dedup key, or closes
// it.
const (
	AlertTrigger = "trigger"
	AlertResolve = "resolve"
)

// RaisedAlert is one alert offered to the outbox (internal/alert encodes
// it; the store keeps its message as bytes).
type RaisedAlert struct {
	// Fold and Destination name what folds together: the bursts of one
	// (fold, destination) within a window become one summary. Fold is the
	// alert's kind, or a name for several kinds that share a limit (the
	// alerts of one incident).
	Fold        string
	Destination string // "" for an alert about no destination
	Kind        string
	// Identity says which alerts are the same alert: an exact repeat of
	// one already folded in the window is dropped, unless Repeatable.
	// Any bytes.
	Identity   string
	Repeatable bool
	Action     string // AlertTrigger or AlertResolve
	DedupKey   string // the channel's incident key (PagerDuty's dedup_key)
	Message    []byte // the alert as its sender encodes it
}

// AlertMessage is a message of the outbox to one channel, as a sender
// claimed it.
type AlertMessage struct {
	ID          int64
	Channel     string
	Kind        string
	Destination string
	Action      string
	DedupKey    string
	Message     []byte
	// More is how many alerts of its fold this one stands for besides
	// itself (the summary's "… and 41 more").
	More int
	// Attempt is this claim's attempt number, 1 for the first: the fence
	// of FinishAlert.
	Attempt   int
	CreatedAt time.Time
	LastError string // the previous attempt's error, if any
}

// AlertOutcome is what came of one attempt to send a message.
type AlertOutcome struct {
	ID      int64
	Attempt int  // the claim's Attempt
	Sent    bool // the channel took it (2xx)
	// RetryIn, when not sent, is when the message is due again.
	RetryIn time.Duration
	Error   string // why it was not sent
}

// AlertOutbox is the part of Store that keeps alerts until their channels
// took them (internal/alert; docs/operations.md, "Alerts"). Folding is
// the store's, so that it survives the process and, on PostgreSQL, holds
// across processes: each fold's message is queued once, by one process,
// and each message to a channel is claimed by one sender at a time.
//
// Windows, due times and leases are judged by the store's clock; callers
// pass durations.
type AlertOutbox interface {
	// RaiseAlerts folds each alert, in order, in one transaction. An
	// alert whose fold is new or whose window is over opens a window: it
	// is queued at once, one message per channel in channels, standing
	// for the alerts folded before it that no summary carried (More).
	// Within the window an alert is counted and kept as the fold's
	// latest; an exact repeat (same Identity) of one folded in the
	// window is dropped unless Repeatable.
	RaiseAlerts(ctx context.Context, as []RaisedAlert, channels []string, window time.Duration) error
	// FlushAlerts queues, for each fold whose window is over and that
	// holds folded alerts, one summary to each channel in channels: its
	// latest alert, standing for the others (More). The summary opens a
	// new window. It forgets folds idle for a window. Of processes
	// flushing at once, one queues each summary. It returns how many
	// summaries it queued.
	FlushAlerts(ctx context.Context, channels []string, window time.Duration) (int, error)
	// ClaimAlerts leases up to limit due messages to the channels, oldest
	// first, for lease, and counts the attempt. A message is not claimed
	// while an older message of its channel and fold is unsent (so a
	// channel gets a fold's messages in order: a resolve never overtakes
	// its trigger), nor while another claim's lease on it runs.
	ClaimAlerts(ctx context.Context, channels []string, limit int, lease time.Duration) ([]AlertMessage, error)
	// FinishAlert records what came of an attempt: sent, or due again
	// after RetryIn. It reports false, changing nothing, when the claim
	// (ID, Attempt) no longer holds: its lease ran out and another
	// sender claimed it, or it was given up.
	FinishAlert(ctx context.Context, o AlertOutcome) (bool, error)
	// PruneAlerts gives up on messages not sent within giveUp of being
	// queued (and not leased now) and returns them; it deletes sent and
	// given-up messages older than keep.
	PruneAlerts(ctx context.Context, giveUp, keep time.Duration) ([]AlertMessage, error)
}
