// Command receiver is an example webhook receiver built on package inbox,
// meant to run behind `anyhook serve` as a destination with a
// signing_secret. It handles three Stripe-style events, one per pattern:
//
//   - payment_intent.amount_capturable_updated: capture the payment through
//     the payments API, claim-then-commit with Hold — a capture must never
//     run twice on its own; a stale claim waits for a person;
//   - invoice.paid: send a receipt email, claim-then-commit with Reclaim —
//     the email API dedupes by the claim's stable key, so a re-run is safe;
//   - customer.subscription.updated: store the subscription status, guarded
//     by the event's version (Stripe's "created") and a state machine.
//
// A Sweeper applies the stale policies every -sweep-interval, so a claim
// whose owner crashed surfaces even when AnyHook has stopped retrying: a
// held capture is logged for a person (resolve it with inbox.Resolve), a
// released receipt waits for `anyhook replay --event <id>`.
//
// Usage:
//
//	receiver -addr :8081 -db receiver.db -payments-url http://payments -email-url http://email
//
// with the destination's signing secret in $RECEIVER_SIGNING_SECRET.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxsql"
	_ "modernc.org/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

// run parses flags, serves until ctx ends, then shuts down.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8081", "listen address")
	fs.StringVar(&cfg.DB, "db", "receiver.db", "SQLite database file")
	fs.StringVar(&cfg.PaymentsURL, "payments-url", "", "payments API base URL (required)")
	fs.StringVar(&cfg.EmailURL, "email-url", "", "email API base URL (required)")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", time.Minute, "how often stale claims are swept")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Secret = getenv("RECEIVER_SIGNING_SECRET")
	m := &Main{Config: cfg, Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	if err := m.Start(ctx); err != nil {
		return err
	}
	m.Logger.Info("listening", "addr", m.Addr())
	<-ctx.Done()
	return m.Stop()
}

// Config is the receiver's configuration.
type Config struct {
	Addr        string // listen address; port 0 picks one
	DB          string // SQLite file
	Secret      string // the AnyHook destination's signing_secret (whsec_…)
	PaymentsURL string // payments API: POST {url}/captures/{payment_intent}
	EmailURL    string // email API: POST {url}/emails
	// SweepInterval is how often stale claims are swept; default 1m.
	SweepInterval time.Duration
}

// Main is the running program.
type Main struct {
	Config Config
	Logger *slog.Logger
	// OnStale, if set, is called for each stale claim the sweeper (or a
	// delivery) applied its policy to, after the receiver has logged it.
	OnStale func(inbox.StaleClaim)

	db      *sql.DB
	ln      net.Listener
	srv     *http.Server
	sweeper *inbox.Sweeper
}

// Start opens the database, migrates it and starts serving.
func (m *Main) Start(ctx context.Context) error {
	if m.Config.PaymentsURL == "" || m.Config.EmailURL == "" {
		return errors.New("-payments-url and -email-url are required")
	}
	verifier, err := inbox.NewStandardWebhooks(m.Config.Secret)
	if err != nil {
		return fmt.Errorf("RECEIVER_SIGNING_SECRET: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+m.Config.DB+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	// One writer at a time: more connections would only wait inside
	// SQLite's busy handler (docs/inbox.md, "Pool sizing").
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	r, err := NewReceiver(ctx, db, m.Config.PaymentsURL, m.Config.EmailURL, inbox.Config{
		Logger: m.Logger,
		OnStale: func(ctx context.Context, c inbox.StaleClaim) {
			if m.OnStale != nil {
				m.OnStale(c)
			}
		},
	})
	if err != nil {
		db.Close()
		return err
	}
	h, err := inbox.NewHandler(inbox.HandlerConfig{Verifier: verifier, Source: "stripe", Handle: r.Handle, Logger: m.Logger})
	if err != nil {
		db.Close()
		return err
	}
	ln, err := net.Listen("tcp", m.Config.Addr)
	if err != nil {
		db.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks", h)
	m.db, m.ln = db, ln
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	m.sweeper = r.ib.NewSweeper(m.Config.SweepInterval)
	m.sweeper.Start(context.WithoutCancel(ctx))
	return nil
}

// Addr is the address the receiver listens on.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Stop drains requests and closes the database. It is idempotent.
func (m *Main) Stop() error {
	if m.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	m.sweeper.Stop()
	m.srv = nil
	return errors.Join(err, m.db.Close())
}

// Receiver holds the handlers.
type Receiver struct {
	ib       *inbox.Inbox[*sql.Tx]
	payments string
	email    string
	client   *http.Client
}

var subscriptionStates = inbox.NewMachine("subscription", map[string][]string{
	"":           {"incomplete", "trialing", "active"},
	"incomplete": {"active", "incomplete_expired"},
	"trialing":   {"active", "past_due", "canceled"},
	"active":     {"past_due", "canceled"},
	"past_due":   {"active", "canceled", "unpaid"},
	"unpaid":     {"active", "canceled"},
})

// NewReceiver migrates db and returns the receiver.
func NewReceiver(ctx context.Context, db *sql.DB, paymentsURL, emailURL string, cfg inbox.Config) (*Receiver, error) {
	ib, err := inbox.New(inboxsql.New(db, inboxsql.SQLite), cfg)
	if err != nil {
		return nil, err
	}
	if err := ib.Migrate(ctx); err != nil {
		return nil, err
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS captures (payment_intent TEXT PRIMARY KEY, captured_at TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS receipts (invoice TEXT PRIMARY KEY, email TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS subscriptions (id TEXT PRIMARY KEY, status TEXT NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, err
		}
	}
	return &Receiver{ib: ib, payments: paymentsURL, email: emailURL, client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// stripeEvent is the part of a Stripe event the receiver reads.
type stripeEvent struct {
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object struct {
			ID            string `json:"id"`
			Status        string `json:"status"`
			CustomerEmail string `json:"customer_email"`
		} `json:"object"`
	} `json:"data"`
}

// Handle routes one verified delivery by event type.
func (r *Receiver) Handle(ctx context.Context, d inbox.Delivery) (inbox.Outcome, error) {
	var se stripeEvent
	if err := json.Unmarshal(d.Event.Body, &se); err != nil || se.Data.Object.ID == "" {
		// A malformed event never gets better: record it and acknowledge.
		return r.ib.Apply(ctx, "malformed", d.Event, func(context.Context, *sql.Tx) error {
			return inbox.Permanent(fmt.Errorf("malformed event: %v", err))
		})
	}
	obj := se.Data.Object
	switch se.Type {
	case "payment_intent.amount_capturable_updated":
		return r.ib.Do(ctx, "capture", d.Event, inbox.Effect[*sql.Tx]{
			Policy: inbox.Hold(5 * time.Minute),
			Run: func(ctx context.Context, c inbox.Claim) error {
				return r.post(ctx, r.payments+"/captures/"+obj.ID, c.Key, nil)
			},
			Finish: func(ctx context.Context, tx *sql.Tx, c inbox.Claim) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO captures (payment_intent, captured_at) VALUES (?, datetime('now'))`, obj.ID)
				return err
			},
		})
	case "invoice.paid":
		return r.ib.Do(ctx, "receipt", d.Event, inbox.Effect[*sql.Tx]{
			Policy: inbox.Reclaim(2*time.Minute, 5),
			Run: func(ctx context.Context, c inbox.Claim) error {
				return r.post(ctx, r.email+"/emails", c.Key, map[string]string{"to": obj.CustomerEmail, "invoice": obj.ID})
			},
			Finish: func(ctx context.Context, tx *sql.Tx, c inbox.Claim) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO receipts (invoice, email) VALUES (?, ?)`, obj.ID, obj.CustomerEmail)
				return err
			},
		})
	case "customer.subscription.updated", "customer.subscription.created", "customer.subscription.deleted":
		return r.ib.Apply(ctx, "subscription", d.Event, func(ctx context.Context, tx *sql.Tx) error {
			order, err := r.ib.Advance(ctx, tx, "subscription", obj.ID, se.Created)
			if err != nil || order == inbox.Older {
				return err // an older event: a newer state is already stored
			}
			var current string
			err = tx.QueryRowContext(ctx, `SELECT status FROM subscriptions WHERE id = ?`, obj.ID).Scan(&current)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if err := subscriptionStates.Check(current, obj.Status); err != nil {
				return inbox.Permanent(err)
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO subscriptions (id, status) VALUES (?, ?)
				ON CONFLICT (id) DO UPDATE SET status = excluded.status`, obj.ID, obj.Status)
			return err
		})
	}
	// Not ours: acknowledge, once.
	return r.ib.Apply(ctx, "ignored", d.Event, func(context.Context, *sql.Tx) error { return nil })
}

// post calls a downstream API with an idempotency key and classifies the
// failure: refused before sending → NotApplied; a 4xx → Permanent; anything
// else (5xx, timeout, connection reset) may or may not have applied.
func (r *Receiver) post(ctx context.Context, url, key string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return inbox.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return inbox.NotApplied(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests:
		return inbox.NotApplied(fmt.Errorf("%s: %s", url, resp.Status)) // rate limited: not processed
	case resp.StatusCode < 500:
		return inbox.Permanent(fmt.Errorf("%s: %s", url, resp.Status))
	}
	return fmt.Errorf("%s: %s", url, resp.Status)
}
