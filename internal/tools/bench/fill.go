package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

const fillUsage = `usage: anyhook bench --fill N [flags]

Fills a store with N events through the store's own batch write path (not
HTTP: ten million events over HTTP take hours), spread over the last 30 days
as a busy gateway would have recorded them: four sources, three
destinations, several event types, objects with versions (some stale),
about 2% duplicates, 2% of deliveries dead, 3% retrying and some dead ones
replayed. It then runs the gateway (a process of its own) on the store and
times every dashboard page and every list, filter and search of the admin
API: once cold (the first request after the process started) and --repeat
times warm, printing p50 and p95 per request.

Disk: with 1 KiB bodies about 3.2 KB per event on SQLite (1M events 3.2 GB,
10M about 32 GB) and 3–4.4 KB on PostgreSQL, dead row versions included
(check df first). On SQLite the report's "disk:" line, under the
store's, gives the file's size and bytes per event.

The fill's outcomes are stamped a batch at a time: the overview's "last
hour" of delivered, dead and failed (and its charts) shows lumps of
thousands in one minute, not a gateway's steady traffic; the counts by
destination and status are exact, and on both stores 3% of deliveries
stay retrying, due a day after the fill. The stores differ in their
times: on SQLite the deliveries carry the 30 days' times (a batch's, and
its replays, the time of the batch's last event: up to 30 days / (N /
1000) after their event); on PostgreSQL they carry the database's now(),
so every outcome of the fill falls in its last minutes (the overview's
last hour shows all of them). Every attempt starts in the 30 days: a
second after its event was received (on SQLite no earlier than its
delivery was created), so the overview's "failed attempts, last hour"
counts only the last hour's, and on PostgreSQL a delivery's last change
is newer than its attempts.

To serve the filled store yourself (anyhook serve), name its sources
stripe, github, shopify and generic (the bench serves all four as
provider generic, signature none, id json:id; the events already carry
their types) and its destinations billing (from stripe, shopify), ci
(github, generic) and ledger (stripe, generic), and set log.key_file to
the key the fill made: PATH-log.key next to a SQLite file, or
anyhook-fill-<12 hex digits>-log.key in the temporary directory for a
PostgreSQL database (the digits: the start of the DSN's SHA-256). Any
other key is refused: the store records the key its log was signed with.
Point the destinations at a sink (anyhook sink): a day after the fill
every retrying delivery (3%, 45,828 at a million) falls due at once and
is sent. Set log.retention: 0s, as the bench does, to keep the store as
filled: with the default (720h) serve prunes the bodies of the events
older than 30 days, the oldest of the fill's first, and more each hour.

flags:
  --fill N         events to add; 0 times an existing store without adding any
  --database DSN   sqlite:PATH or postgres://… (default: SQLite in a temporary
                   directory, removed at the end); a given store is kept, and a
                   later --fill adds to it
  --written W      write only W of the N events through the store (default:
                   all); the rest are copies of those W made in SQL, each
                   with ids, dedup keys and objects of its own and the same
                   times, bodies and outcomes (N/W at most 256). --written 0
                   copies the latest earlier fill's events, skipping the
                   copies it already made: it resumes a copy that stopped.
                   The copy drops the indexes it does not read by and
                   builds them again at its end (a copy that stopped
                   leaves them dropped until it is resumed)
  --batch B        events per Ingest call (default 1000)
  --body-size S    body size (default 1KiB)
  --repeat R       warm requests per URL (default 20)
  --json           print the report as JSON
`

type fillOptions struct {
	events   int
	written  int
	database string
	batch    int
	bodySize int
	repeat   int
	json     bool
}

// isFill reports whether args ask for `anyhook bench --fill`.
func isFill(args []string) bool {
	for _, a := range args {
		if a == "--fill" || a == "-fill" || strings.HasPrefix(a, "--fill=") || strings.HasPrefix(a, "-fill=") {
			return true
		}
	}
	return false
}

func parseFillFlags(args []string) (*fillOptions, error) {
	o := &fillOptions{}
	fs := cli.NewFlagSet("bench")
	fs.IntVar(&o.events, "fill", 0, "")
	fs.StringVar(&o.database, "database", "", "")
	fs.IntVar(&o.written, "written", -1, "")
	fs.IntVar(&o.batch, "batch", 1000, "")
	size := fs.String("body-size", "1KiB", "")
	fs.IntVar(&o.repeat, "repeat", 20, "")
	fs.BoolVar(&o.json, "json", false, "")
	// --fill --help: the help, not "invalid value" for --fill.
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		return nil, flag.ErrHelp
	}
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	n, err := parseSize(*size)
	if err != nil {
		return nil, fmt.Errorf("--body-size: %w", err)
	}
	o.bodySize = n
	if o.written < 0 || o.written > o.events {
		o.written = o.events
	}
	switch {
	case o.events < 0:
		return nil, errors.New("--fill cannot be negative")
	case o.events == 0 && o.database == "":
		return nil, errors.New("--fill 0 times an existing store: name it with --database")
	case o.written == 0 && o.events > 0 && o.database == "":
		return nil, errors.New("--written 0 copies the events of an earlier fill: name its store with --database")
	case o.written > 0 && (o.events+o.written-1)/o.written > 256:
		return nil, fmt.Errorf("--written %d: at most 255 copies of each written event; write at least %d", o.written, (o.events+255)/256)
	case o.batch < 1 || o.batch > 10000:
		return nil, errors.New("--batch must be 1..10000")
	case o.repeat < 1:
		return nil, errors.New("--repeat must be at least 1")
	case o.bodySize < 64 || o.bodySize > 1<<20:
		return nil, errors.New("--body-size must be between 64 bytes and 1MiB")
	case o.database != "" && !strings.HasPrefix(o.database, "sqlite:") && !strings.HasPrefix(o.database, "postgres://") && !strings.HasPrefix(o.database, "postgresql://"):
		return nil, fmt.Errorf("--database %q is neither sqlite:PATH nor postgres://…", o.database)
	}
	return o, nil
}

// fillMain runs `anyhook bench --fill N`.
func fillMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFillFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, fillUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench: %v\n", err)
		return 2
	}
	if o.database == "" {
		dir, err := os.MkdirTemp("", "anyhook-fill")
		if err != nil {
			fmt.Fprintf(stderr, "anyhook bench: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		o.database = "sqlite:" + filepath.Join(dir, "fill.db")
	}
	rep, err := fillAndTime(ctx, o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		if rep == nil {
			return 1
		}
	}
	rep.write(stdout, o.json)
	if err != nil || len(rep.Failures) > 0 {
		return 1
	}
	return 0
}

// The shape of the filled store: who sends what to whom.
var (
	fillSources = []string{"stripe", "github", "shopify", "generic"}
	fillRoutes  = map[string][]string{"stripe": {"billing", "ledger"}, "github": {"ci"}, "shopify": {"billing"}, "generic": {"ci", "ledger"}}
	fillDests   = []string{"billing", "ci", "ledger"}
	fillTypes   = []string{"invoice.paid", "invoice.created", "charge.succeeded", "customer.updated",
		"push", "pull_request.opened", "orders/create", "orders/paid"}
)

// fillStore is what the fill needs of a store.
type fillStore interface {
	Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error)
	Claim(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error)
	Finish(ctx context.Context, outs []store.Outcome) ([]string, error)
	Replay(ctx context.Context, eventID string, destinations []string, by store.Actor) ([]anyhook.Delivery, error)
	Close() error
}

// openFill opens the store; on SQLite its clock is clock, so that the rows
// carry the times of the spread (PostgreSQL's is now() in the database: its
// deliveries and their transitions carry the fill's own times).
func openFill(ctx context.Context, dsn string, clock *atomic.Int64) (fillStore, error) {
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		return sqlite.Open(ctx, path, sqlite.Options{Now: func() time.Time { return time.UnixMicro(clock.Load()) }})
	}
	return postgres.Open(ctx, dsn, postgres.Options{})
}

// fill adds o.events events to the store, the oldest 30 days ago, the
// newest now.
// Opening the store applies its pending migrations: opened says how long
// that took, the time a migration holds its locks.
func fill(ctx context.Context, o *fillOptions, say func(string, ...any)) (took, opened time.Duration, err error) {
	var clock atomic.Int64
	end := time.Now()
	start := end.Add(-30 * 24 * time.Hour)
	clock.Store(start.UnixMicro())
	t0 := time.Now()
	st, err := openFill(ctx, o.database, &clock)
	if err != nil {
		return 0, 0, err
	}
	closed := false
	defer func() {
		if !closed {
			st.Close()
		}
	}()
	opened = time.Since(t0)
	run := fmt.Sprintf("%x", end.UnixNano()/1e6)
	body := strings.Repeat("x", o.bodySize)
	step := end.Sub(start) / time.Duration(max(o.written, 1))
	t0 = time.Now()
	lastSay := t0
	for i := 0; i < o.written; i += o.batch {
		n := min(o.batch, o.written-i)
		evs := make([]store.NewEvent, 0, n)
		for j := i; j < i+n; j++ {
			evs = append(evs, fillEvent(run, j, start.Add(time.Duration(j)*step), body))
		}
		clock.Store(start.Add(time.Duration(i+n) * step).UnixMicro())
		res, err := st.Ingest(ctx, evs)
		if err != nil {
			return 0, opened, fmt.Errorf("ingest at event %d: %w", i, err)
		}
		for k, r := range res {
			if r.Err != nil {
				return 0, opened, fmt.Errorf("ingest of event %d: %w", i+k, r.Err)
			}
		}
		// A retry is due a day after the fill's end. On SQLite the clock
		// is the spread's: a day after its batch, a later batch would try
		// (and deliver) it again.
		retryIn := 24 * time.Hour
		spread := strings.HasPrefix(o.database, "sqlite:")
		if spread {
			retryIn = end.Add(retryIn).Sub(time.UnixMicro(clock.Load()))
		}
		if err := settle(ctx, st, i, retryIn, spread); err != nil {
			return 0, opened, err
		}
		if time.Since(lastSay) > 10*time.Second {
			lastSay = time.Now()
			say("filled %d of %d events (%.0f/s)", i+n, o.written, float64(i+n)/time.Since(t0).Seconds())
		}
	}
	if o.written == 0 {
		run = "" // the latest earlier fill's
	}
	if o.written < o.events {
		// The copies are written with SQL of their own, on a connection of
		// their own: the store lets go of the database first.
		closed = true
		if err := st.Close(); err != nil {
			return 0, opened, err
		}
		say("wrote %d events in %s; copying them to %d", o.written, time.Since(t0).Round(time.Second), o.events)
		if err := copyFill(ctx, o.database, run, o.events-o.written, 10000, say); err != nil {
			return 0, opened, fmt.Errorf("copy: %w", err)
		}
	}
	took = time.Since(t0)
	if dsn := o.database; strings.HasPrefix(dsn, "postgres") && o.events > 0 {
		say("analyzing the tables (as autovacuum would before long)")
		if err := analyze(ctx, dsn); err != nil {
			return took, opened, err
		}
	}
	return took, opened, nil
}

// fillEvent is the j-th event: about 2% repeat an earlier one's dedup key
// (duplicates), 30% are versions of one of 20,000 objects, a few of them
// older than the object's newest (stale).
func fillEvent(run string, j int, at time.Time, body string) store.NewEvent {
	src := fillSources[j%len(fillSources)]
	key := fmt.Sprintf("evt_%s_%d", run, j)
	if j%50 == 7 && j >= 100 {
		key = fmt.Sprintf("evt_%s_%d", run, j-4) // the same source, and not itself a duplicate
	}
	ev := anyhook.Event{ID: store.NewID(), Source: src, DedupKey: key, ReceivedAt: at, Method: "POST",
		Path: "/webhooks/" + src, Header: map[string][]string{"Content-Type": {"application/json"}},
		Body: []byte(`{"id":"` + key + `","pad":"` + body + `"}`), Type: fillTypes[(j/3)%len(fillTypes)],
		Origin: anyhook.OriginWebhook,
		// As the gateway records a signature: none source's request (the
		// sources the help names): without it the event page said "not
		// recorded (received before AnyHook recorded how)".
		Verification: anyhook.Verification{Method: anyhook.VerifyNone, Scheme: "unsigned (signature: none)", Secret: -1}}
	if j%10 < 3 {
		ev.Object = fmt.Sprintf("obj_%d", j%20000)
		v := j
		if j%97 == 0 && j >= 40000 {
			v = j - 40000 // older than the object's newest: stale
		}
		ev.Version = fmt.Sprint(v)
	}
	return store.NewEvent{Event: ev, Destinations: fillRoutes[src]}
}

// settle claims every due delivery and finishes each: 95% delivered, 3%
// retrying (due again in retryIn), 2% dead; one dead delivery in ten is
// replayed and the replay delivered. spread says the store stamps its
// rows with the spread's clock (SQLite), not the database's now().
func settle(ctx context.Context, st fillStore, batch int, retryIn time.Duration, spread bool) error {
	for _, d := range fillDests {
		for {
			cs, err := st.Claim(ctx, d, 1000, time.Hour)
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			if len(cs) == 0 {
				break
			}
			outs := make([]store.Outcome, len(cs))
			var dead []store.Claim
			for k, c := range cs {
				outs[k] = outcome(c, batch+k, retryIn, spread)
				if outs[k].Status == anyhook.StatusDead {
					dead = append(dead, c)
				}
			}
			if _, err := st.Finish(ctx, outs); err != nil {
				return fmt.Errorf("finish: %w", err)
			}
			for k, c := range dead {
				if (batch/1000+k)%10 != 0 || c.Delivery.Replay {
					continue
				}
				if _, err := st.Replay(ctx, c.Event.ID, []string{d}, store.Actor{Name: "bench", Reason: "filled"}); err != nil {
					return fmt.Errorf("replay: %w", err)
				}
			}
		}
	}
	return nil
}

// outcome is the k-th claim's; its attempt starts a second after the
// event was received, so that the attempts spread over the fill's days as
// the events do. When the store stamps the delivery with the spread's
// clock (spread: SQLite, where a batch's deliveries, and a replay, are
// created at the batch's end, up to 30 days / (N / batch) after the
// event), the attempt starts no earlier than its delivery was created:
// else a replay's page showed it tried hours before it was made. On
// PostgreSQL the delivery carries now(), the fill's own time.
func outcome(c store.Claim, k int, retryIn time.Duration, spread bool) store.Outcome {
	started := c.Event.ReceivedAt.Add(time.Second)
	if spread && started.Before(c.Delivery.CreatedAt) {
		started = c.Delivery.CreatedAt
	}
	out := store.Outcome{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: anyhook.StatusDelivered,
		Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: started, Duration: 40 * time.Millisecond, StatusCode: 200,
			Outcome: anyhook.OutcomeAnswered}}
	switch {
	case c.Delivery.Replay:
	case k%100 < 2:
		out.Status = anyhook.StatusDead
		out.Result.StatusCode, out.Result.Error = 500, "500 Internal Server Error"
	case k%100 < 5:
		out.Status, out.RetryIn = anyhook.StatusPending, retryIn
		out.Result.StatusCode, out.Result.Error = 503, "503 Service Unavailable"
	}
	return out
}

// analyze runs ANALYZE on a PostgreSQL store: right after a fill its
// statistics still describe the empty tables, and the planner picks scans
// that autovacuum's next ANALYZE would not.
func analyze(ctx context.Context, dsn string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `ANALYZE`)
	return err
}
