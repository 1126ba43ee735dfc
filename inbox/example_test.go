package inbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxsql"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// exampleInbox opens a fresh SQLite database with inbox's tables and an
// orders table.
func exampleInbox() (*inbox.Inbox[*sql.Tx], *sql.DB, func()) {
	dir, err := os.MkdirTemp("", "inbox-example")
	if err != nil {
		panic(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		panic(err)
	}
	ib, err := inbox.New(inboxsql.New(db, inboxsql.SQLite), inbox.Config{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := ib.Migrate(ctx); err != nil {
		panic(err)
	}
	if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`); err != nil {
		panic(err)
	}
	return ib, db, func() { db.Close(); os.RemoveAll(dir) }
}

// Apply: the processed row and the business write commit together; a
// redelivery is a duplicate and does not run the function.
func ExampleInbox_Apply() {
	ib, _, done := exampleInbox()
	defer done()
	ctx := context.Background()

	ev := inbox.Event{Source: "shop", ID: "evt_1", Body: []byte(`{"order":"o_1","status":"paid"}`)}
	for range 2 {
		out, err := ib.Apply(ctx, "mark-paid", ev, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (id, status) VALUES ('o_1', 'paid')`)
			return err
		})
		fmt.Println(out, err, out.HTTPStatus())
	}
	// Output:
	// processed <nil> 200
	// duplicate <nil> 200
}

// Do: a side effect that cannot roll back, here a receipt email. The stale
// policy is declared per call; the claim's stable Key is the email
// provider's idempotency key, so a reclaim after a crash cannot send twice.
func ExampleInbox_Do() {
	ib, _, done := exampleInbox()
	defer done()
	ctx := context.Background()

	sendEmail := func(ctx context.Context, idempotencyKey string) error {
		fmt.Println("sending receipt, idempotency key set:", idempotencyKey != "")
		return nil
	}
	ev := inbox.Event{Source: "stripe", ID: "evt_2"}
	receipt := inbox.Effect[*sql.Tx]{
		Policy: inbox.Reclaim(10*time.Minute, 3),
		Run: func(ctx context.Context, c inbox.Claim) error {
			return sendEmail(ctx, c.Key)
		},
		Finish: func(ctx context.Context, tx *sql.Tx, c inbox.Claim) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (id, status) VALUES ('o_2', 'receipt-sent')`)
			return err
		},
	}
	out, err := ib.Do(ctx, "receipt", ev, receipt)
	fmt.Println(out, err)
	out, err = ib.Do(ctx, "receipt", ev, receipt)
	fmt.Println(out, err)

	// Forgetting the policy is an error, not a silent default.
	_, err = ib.Do(ctx, "receipt", inbox.Event{ID: "evt_3"}, inbox.Effect[*sql.Tx]{Run: receipt.Run})
	fmt.Println(errors.Is(err, inbox.ErrNoPolicy))
	// Output:
	// sending receipt, idempotency key set: true
	// processed <nil>
	// duplicate <nil>
	// true
}

// Advance: a per-object high-water mark in the same transaction as the
// state it guards; an older event arriving late changes nothing.
func ExampleInbox_Advance() {
	ib, db, done := exampleInbox()
	defer done()
	ctx := context.Background()

	update := func(eventID string, version int64, status string) {
		_, err := ib.Apply(ctx, "order-status", inbox.Event{ID: eventID}, func(ctx context.Context, tx *sql.Tx) error {
			order, err := ib.Advance(ctx, tx, "order", "o_3", version)
			if err != nil {
				return err
			}
			fmt.Printf("v%d %s: %v\n", version, status, order)
			if order != inbox.Newer {
				return nil
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO orders (id, status) VALUES ('o_3', ?)
				ON CONFLICT (id) DO UPDATE SET status = excluded.status`, status)
			return err
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	update("evt_a", 200, "shipped")
	update("evt_b", 100, "paid") // late
	update("evt_c", 200, "shipped")

	var status string
	db.QueryRow(`SELECT status FROM orders WHERE id = 'o_3'`).Scan(&status)
	fmt.Println("status:", status)
	// Output:
	// v200 shipped: newer
	// v100 paid: older
	// v200 shipped: equal
	// status: shipped
}

func ExampleMachine_Check() {
	m := inbox.NewMachine("subscription", map[string][]string{
		"":         {"active"},
		"active":   {"past_due", "canceled"},
		"past_due": {"active", "canceled"},
	})
	fmt.Println(m.Check("active", "past_due"))
	err := m.Check("canceled", "active")
	fmt.Println(err, errors.Is(err, inbox.ErrIllegalTransition))
	// Output:
	// <nil>
	// inbox: subscription: illegal transition canceled -> active true
}

// NewHandler: the endpoint AnyHook delivers to. It verifies AnyHook's
// Standard Webhooks signature before anything else and maps the outcome to
// a status code.
func ExampleNewHandler() {
	ib, _, done := exampleInbox()
	defer done()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the destination's signing_secret

	verifier, err := inbox.NewStandardWebhooks(secret)
	if err != nil {
		panic(err)
	}
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Verifier: verifier,
		Handle: func(ctx context.Context, d inbox.Delivery) (inbox.Outcome, error) {
			return ib.Apply(ctx, "orders", d.Event, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO orders (id, status) VALUES ('o_4', 'paid')`)
				return err
			})
		},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// What AnyHook sends.
	body := []byte(`{"type":"order.paid"}`)
	wh, _ := standardwebhooks.NewWebhook(secret)
	now := time.Now()
	sig, _ := wh.Sign("evt_4", now, body)
	deliver := func(signature string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
		req.Header.Set("X-AnyHook-Delivery", "evt_4")
		req.Header.Set("webhook-id", "evt_4")
		req.Header.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
		req.Header.Set("webhook-signature", signature)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(msg))
	}
	deliver("v1,Zm9yZ2VkIHNpZ25hdHVyZQ==")
	deliver(sig)
	deliver(sig)
	// Output:
	// 400 invalid signature: signature mismatch (no matching v1 signature)
	// 200 processed
	// 200 duplicate
}

// One delivery, two steps: the order is marked paid (Apply, rolls back
// with the transaction), then the receipt is sent (Do, cannot roll back).
// Each step has its own handler name, so each is deduplicated on its own: a
// retry skips what is done (Duplicate) and resumes at the first step that
// is not. Answer the first outcome that is not Processed or Duplicate — it
// says why the delivery is not finished (or, for Failed or Conflict, why it
// never will be) — and otherwise the last step's.
func ExampleInbox_Do_afterApply() {
	ib, _, done := exampleInbox()
	defer done()
	ctx := context.Background()

	handle := func(ctx context.Context, d inbox.Delivery) (inbox.Outcome, error) {
		out, err := ib.Apply(ctx, "mark-paid", d.Event, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (id, status) VALUES ('o_5', 'paid')`)
			return err
		})
		if out != inbox.Processed && out != inbox.Duplicate {
			return out, err // not done, or failed for good: no receipt
		}
		return ib.Do(ctx, "receipt", d.Event, inbox.Effect[*sql.Tx]{
			Policy: inbox.Reclaim(10*time.Minute, 3),
			Run: func(ctx context.Context, c inbox.Claim) error {
				fmt.Println("sending receipt")
				return nil
			},
		})
	}
	d := inbox.Delivery{Event: inbox.Event{Source: inbox.DefaultSource, ID: "evt_5"}}
	for range 2 {
		out, err := handle(ctx, d)
		fmt.Println(out, err, out.HTTPStatus())
	}
	// Output:
	// sending receipt
	// processed <nil> 200
	// duplicate <nil> 200
}

// The receiver the README shows, compiled (not run: it listens on :8080).
// TestReadmeExample keeps the README's copy equal to the code between the
// README markers.
func Example() {
	ctx := context.Background()
	// README:begin
	db, err := sql.Open("sqlite", "file:app.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(8) // see "Pool sizing" in docs/inbox.md
	ib, err := inbox.New(inboxsql.New(db, inboxsql.SQLite), inbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := ib.Migrate(ctx); err != nil { // creates inbox's tables; checks the dialect
		log.Fatal(err)
	}
	verifier, err := inbox.NewStandardWebhooks(os.Getenv("SIGNING_SECRET")) // the destination's signing_secret
	if err != nil {
		log.Fatal(err)
	}
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Verifier: verifier,
		Handle: func(ctx context.Context, d inbox.Delivery) (inbox.Outcome, error) {
			// The dedup row and your writes commit together, or not at all.
			return ib.Apply(ctx, "orders", d.Event, func(ctx context.Context, tx *sql.Tx) error {
				var order struct {
					ID string `json:"order_id"`
				}
				if err := json.Unmarshal(d.Event.Body, &order); err != nil {
					return inbox.Permanent(err) // never gets better: recorded, acknowledged
				}
				_, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'paid' WHERE id = ?`, order.ID)
				return err
			})
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	sweeper := ib.NewSweeper(time.Minute) // surfaces stale claims of ib.Do even if no retry comes
	sweeper.Start(ctx)
	defer sweeper.Stop()
	http.Handle("POST /webhooks", h)
	log.Fatal(http.ListenAndServe(":8080", nil))
	// README:end
}
