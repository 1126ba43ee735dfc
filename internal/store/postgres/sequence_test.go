package postgres_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/syncio"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestSequenceSweepsInChunks: events that reached the table with triggers
// off (so no ledger_pending row: a restore in replica mode, say) are
// logged by the sweep, which reads one chunk of ids a round, so that no
// round reads every event; a pending row whose event is gone is dropped;
// once a pass ends, the next starts only after sweepEvery.
func TestSequenceSweepsInChunks(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	s.SetSweepChunk(4)
	seq := ledger.NewSequencer(s, ledger.SequencerOptions{})
	var ids []string
	for range 12 {
		id := store.NewID()
		ids = append(ids, id)
		if _, err := s.Ingest(t.Context(), []store.NewEvent{plainEvent(id)}); err != nil {
			t.Fatal(err)
		}
	}
	c := connect(t, dsn)
	exec := func(q string, args ...any) { t.Helper(); run(t, c, q, args...) }
	logged := func() []string {
		t.Helper()
		rows, err := c.Query(t.Context(), `SELECT event_id FROM ledger_entries ORDER BY event_id`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The first pass of a new database is due at once: let it end.
	for range 6 {
		if _, err := seq.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := logged(); !slices.Equal(got, ids) {
		t.Fatalf("logged %v, want the 12 ingested", got)
	}

	// Three events written into the table with triggers off, each sorting right
	// after an ingested one (ids 0, 4 and 8: with them, the events sort
	// into chunks of four holding one straggler each, then one with none),
	// and a pending row whose event does not exist.
	exec(`SET session_replication_role = replica`) // no triggers
	var straggler []string
	for _, i := range []int{0, 4, 8} {
		id := ids[i] + "-direct"
		straggler = append(straggler, id)
		exec(`INSERT INTO events (id, source, dedup_key, received_at, method, path, headers, body)
			SELECT $1, source, $1, received_at, method, path, headers, body FROM events WHERE id = $2`, id, ids[i])
	}
	exec(`SET session_replication_role = DEFAULT`)
	exec(`INSERT INTO ledger_pending (event_id) VALUES ($1)`, ids[3]+"-gone")
	if n, err := seq.Once(t.Context()); err != nil || n != 0 {
		t.Fatalf("a round between passes logged %d (%v), want 0: the stragglers wait for the next pass", n, err)
	}
	exec(`UPDATE ledger_state SET swept_at = '-infinity'`) // the next pass is due
	// 15 events, one chunk a round.
	for round, want := range []int{1, 1, 1, 0} {
		n, err := seq.Once(t.Context())
		if err != nil || n != want {
			t.Fatalf("round %d of the pass logged %d (%v), want %d", round, n, err, want)
		}
	}
	for _, id := range straggler {
		if !slices.Contains(logged(), id) {
			t.Errorf("straggler %s not logged", id)
		}
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM ledger_pending`); n != 0 {
		t.Errorf("%d pending rows left (the orphan must go)", n)
	}
	if cursor := query[string](t, dsn, `SELECT sweep_cursor FROM ledger_state`); cursor != "" {
		t.Errorf("sweep_cursor %q after the pass, want ''", cursor)
	}
}

// TestMigrateFillsLedgerPending: the upgrade to the pending queue puts in
// it exactly the events the log does not hold yet, so the sequencer,
// which no longer looks elsewhere between sweeps, logs them.
func TestMigrateFillsLedgerPending(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	var ids []string
	for range 3 {
		id := store.NewID()
		ids = append(ids, id)
		if _, err := s.Ingest(t.Context(), []store.NewEvent{plainEvent(id)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ledger.NewSequencer(s, ledger.SequencerOptions{}).Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Back to version 11 with one event recorded but not logged.
	c := connect(t, dsn)
	for _, q := range append(toVersion11,
		`DELETE FROM ledger_hashes WHERE idx >= 1`, // the tree of one entry
		`DELETE FROM ledger_entries WHERE idx >= 1`,
	) {
		if _, err := c.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = openDSN(t, dsn)
	want := ids[1:]
	rows, err := c.Query(t.Context(), `SELECT event_id FROM ledger_pending ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("pending after the upgrade: %v (%v), want %v", got, err, want)
	}
	if n, err := ledger.NewSequencer(s, ledger.SequencerOptions{}).Once(t.Context()); err != nil || n != 2 {
		t.Fatalf("the round after the upgrade logged %d (%v), want 2", n, err)
	}
}

// TestSequencePendingEdges: a pending id whose event the log already holds
// (a sequencer of an older version logged it during a rolling upgrade,
// leaving the id) neither fails a round nor holds up new events; an event
// a process of an older version inserts (no ingest code for the queue)
// is queued by the trigger and logged at the next round.
func TestSequencePendingEdges(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	seq := ledger.NewSequencer(s, ledger.SequencerOptions{})
	newEvent := func() store.NewEvent { return plainEvent(store.NewID()) }
	old := newEvent()
	if _, err := s.Ingest(t.Context(), []store.NewEvent{old}); err != nil {
		t.Fatal(err)
	}
	if n, err := seq.Once(t.Context()); err != nil || n != 1 {
		t.Fatalf("first round: %d, %v", n, err)
	}
	c := connect(t, dsn)
	if _, err := c.Exec(t.Context(), `INSERT INTO ledger_pending (event_id) VALUES ($1)`, old.Event.ID); err != nil {
		t.Fatal(err)
	}
	next := newEvent()
	if _, err := s.Ingest(t.Context(), []store.NewEvent{next}); err != nil {
		t.Fatal(err)
	}
	if n, err := seq.Once(t.Context()); err != nil || n != 1 {
		t.Fatalf("a round with an already logged id queued: %d, %v; want the new event logged", n, err)
	}
	// Inserted as an older version's ingest would: the trigger queues it.
	direct := store.NewID()
	if _, err := c.Exec(t.Context(), insertEvent, direct); err != nil {
		t.Fatal(err)
	}
	if n, err := seq.Once(t.Context()); err != nil || n != 1 {
		t.Fatalf("a round after an insert without the queue: %d, %v; want it logged", n, err)
	}
	if _, err := s.LedgerEntry(t.Context(), direct); err != nil {
		t.Errorf("the directly inserted event: %v", err)
	}
	// An id queued and left behind (its event deleted before it was
	// logged) does not fail a new event that reuses it.
	reused := store.NewID()
	if _, err := c.Exec(t.Context(), `INSERT INTO ledger_pending (event_id) VALUES ($1)`, reused); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(t.Context(), []store.NewEvent{plainEvent(reused)}); err != nil {
		t.Fatal(err)
	}
	if n, err := seq.Once(t.Context()); err != nil || n != 1 {
		t.Fatalf("a round after an event reused a queued id: %d, %v; want it logged", n, err)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM ledger_pending`); n != 0 {
		t.Errorf("%d pending rows left", n)
	}
}

// TestMigrateQueuesWithoutBlockingIngest: the upgrade to the queue reads
// every event to find those the log lacks, which on a large database takes
// a while; processes of the older version keep ingesting meanwhile
// (rolling upgrade), so that read must not run under the trigger's lock on
// events (SHARE ROW EXCLUSIVE, which makes every INSERT wait). The read
// is held up here by a lock on ledger_entries; the events an older process
// inserts during the upgrade, before the trigger exists, are queued too.
func TestMigrateQueuesWithoutBlockingIngest(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	if _, err := s.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{ID: store.NewID(), Source: "s", DedupKey: "k", ReceivedAt: time.Now(),
		Method: "POST", Path: "/webhooks/s", Body: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	c := connect(t, dsn)
	for _, q := range toVersion11 {
		run(t, c, q)
	}
	blocker := connect(t, dsn)
	run(t, blocker, `BEGIN`)
	run(t, blocker, `LOCK TABLE ledger_entries IN ACCESS EXCLUSIVE MODE`)
	opened := upgrade(dsn)
	waitForLock(t, c, "ledger_entries", "the upgrade waiting to read ledger_entries")
	var held []string
	rows, err := c.Query(t.Context(), `SELECT mode FROM pg_locks WHERE relation = 'events'::regclass AND granted
		AND mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')`)
	if err == nil {
		held, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(held) > 0 {
		run(t, blocker, `ROLLBACK`)
		<-opened
		t.Fatalf("while it reads the events, the upgrade holds %v on events: every insert by a running process waits", held)
	}
	// An older process ingests meanwhile: no trigger yet.
	during := store.NewID()
	run(t, c, insertEvent, during)
	run(t, blocker, `COMMIT`)
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	s = openDSN(t, dsn)
	if n, err := ledger.NewSequencer(s, ledger.SequencerOptions{}).Once(t.Context()); err != nil || n != 2 {
		t.Fatalf("the round after the upgrade logged %d (%v), want both events", n, err)
	}
	if _, err := s.LedgerEntry(t.Context(), during); err != nil {
		t.Errorf("the event inserted during the upgrade: %v", err)
	}
}

// TestMigrateQueuesEventsInsertedDuringIt: an older process's ingest
// transaction that inserted an event before the upgrade read the events,
// and commits while the upgrade waits to create the trigger, is in
// neither; the look under the trigger's lock queues it.
func TestMigrateQueuesEventsInsertedDuringIt(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	openDSN(t, dsn).Close()
	c := connect(t, dsn)
	for _, q := range toVersion11 {
		run(t, c, q)
	}
	old := connect(t, dsn)
	id := store.NewID()
	run(t, old, `BEGIN`)
	run(t, old, insertEvent, id)
	opened := upgrade(dsn)
	waitForLock(t, c, "events", "the upgrade waiting for the ingest to create the trigger")
	run(t, old, `COMMIT`)
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM ledger_pending WHERE event_id = '`+id+`'`); n != 1 {
		t.Fatalf("the event committed during the upgrade: %d pending rows, want 1", n)
	}
}

// toVersion11 takes a database back to before migration 12 (and 13,
// which replaced its trigger).
var toVersion11 = []string{
	`DROP TRIGGER events_ledger_queue ON events`,
	`DROP FUNCTION ledger_pending_add_inserted()`,
	`DROP TRIGGER events_ledger_pending ON events`,
	`DROP FUNCTION ledger_pending_add()`,
	`DROP TABLE ledger_pending`,
	`ALTER TABLE ledger_state DROP COLUMN sweep_cursor`,
	`DELETE FROM schema_migrations WHERE version IN (12, 13)`,
}

// TestSequenceQueuesInsertsUnderAnySearchPath: the trigger runs in the
// session that inserts the event, under its search_path. A session whose
// search_path does not name the gateway's schema (pg_dump's scripts empty
// it, a role may have its own) inserted into events before the queue
// existed; its insert must still succeed, and be queued.
func TestSequenceQueuesInsertsUnderAnySearchPath(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	c := connect(t, dsn)
	var schema string
	if err := c.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(t.Context(), `SET search_path = ''`); err != nil {
		t.Fatal(err)
	}
	id := store.NewID()
	if _, err := c.Exec(t.Context(), `INSERT INTO `+pgx.Identifier{schema, "events"}.Sanitize()+` (id, source, dedup_key, received_at, method, path, headers, body)
		VALUES ($1, 's', $1, now(), 'POST', '/webhooks/s', '', '{}')`, id); err != nil {
		t.Fatalf("insert with search_path '': %v", err)
	}
	if n, err := ledger.NewSequencer(s, ledger.SequencerOptions{}).Once(t.Context()); err != nil || n != 1 {
		t.Fatalf("the round after the insert logged %d (%v), want 1", n, err)
	}
}

// connect opens a connection of its own to dsn, closed when t ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// run executes q on c, or fails t.
func run(t *testing.T, c *pgx.Conn, q string, args ...any) {
	t.Helper()
	if _, err := c.Exec(t.Context(), q, args...); err != nil {
		t.Fatalf("%.80s: %v", q, err)
	}
}

// plainEvent is a new event of source s whose dedup key is its id.
func plainEvent(id string) store.NewEvent {
	return store.NewEvent{Event: anyhook.Event{ID: id, Source: "s", DedupKey: id, ReceivedAt: time.Now(),
		Method: "POST", Path: "/webhooks/s", Body: []byte(`{}`)}}
}

// upgrade opens the store on dsn in the background (applying its
// migrations) and closes it; the channel gives Open's error.
func upgrade(dsn string) <-chan error { return upgradeWith(dsn, postgres.Options{}) }

// upgradeWith is upgrade with the store's options opt.
func upgradeWith(dsn string, opt postgres.Options) <-chan error {
	opened := make(chan error, 1)
	go func() {
		s, err := postgres.Open(context.Background(), dsn, opt)
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	return opened
}

// atVersion12 is a database of its own taken back to before migration 13,
// and a connection to it.
func atVersion12(t *testing.T) (dsn string, c *pgx.Conn) {
	t.Helper()
	dsn = pgtest.DSN(t)
	openDSN(t, dsn).Close()
	c = connect(t, dsn)
	toVersion12(t, c)
	return dsn, c
}

// loggedUpgrade is the options of an upgrade whose lock timeout is d and
// whose log goes to logs.
func loggedUpgrade(logs *syncio.Buffer, d time.Duration) postgres.Options {
	return postgres.WithMigrateLockTimeout(postgres.Options{MaxConns: testConns, Logger: slog.New(slog.NewTextHandler(logs, nil))}, d)
}

// waitForLock waits until some session waits for a lock on table (what
// says who, for the failure message).
func waitForLock(t *testing.T, c *pgx.Conn, table, what string) {
	t.Helper()
	testwait.For(t, what, func() bool {
		var waiting bool
		if err := c.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = $1::regclass AND NOT granted)`, table).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
}

// TestMigration13DoesNotWaitForReads: migration 13 swaps the log queue's
// row trigger for a statement trigger without an ACCESS EXCLUSIVE lock on
// events (DROP TRIGGER's), which would wait behind any read in progress
// while every read and insert of the older processes queued behind it.
// It applies while a read of events is open, and then queues each new
// event once.
func TestMigration13DoesNotWaitForReads(t *testing.T) {
	t.Parallel()
	dsn, c := atVersion12(t)
	reader := connect(t, dsn)
	run(t, reader, `BEGIN`)
	run(t, reader, `SELECT count(*) FROM events`) // ACCESS SHARE on events, held
	opened := upgrade(dsn)
	var applied bool
	var err error
	testwait.For(t, "the upgrade to apply or to wait for a lock on events", func() bool {
		select {
		case err = <-opened:
			applied = true
			return true
		default:
		}
		var waiting bool
		if err := c.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = 'events'::regclass AND NOT granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	run(t, reader, `COMMIT`)
	if !applied {
		t.Fatalf("migration 13 waited for a lock on events behind a read in progress (then: %v)", <-opened)
	}
	if err != nil {
		t.Fatal(err)
	}
	triggers := query[string](t, dsn, `SELECT string_agg(tgname || ' ' || tgenabled::text, ', ' ORDER BY tgname) FROM pg_trigger
		WHERE tgrelid = 'events'::regclass AND NOT tgisinternal AND tgname LIKE 'events_ledger%'`)
	if triggers != "events_ledger_pending D, events_ledger_queue O" {
		t.Fatalf("triggers on events = %q, want the row trigger disabled and the statement trigger enabled", triggers)
	}
	id := store.NewID()
	run(t, c, insertEvent, id)
	if n := query[int64](t, dsn, `SELECT count(*) FROM ledger_pending WHERE event_id = '`+id+`'`); n != 1 {
		t.Fatalf("an event inserted after the upgrade: %d pending rows, want 1", n)
	}
}

// toVersion12 takes a database back to before migration 13.
func toVersion12(t *testing.T, c *pgx.Conn) {
	t.Helper()
	for _, q := range []string{
		`DROP TRIGGER events_ledger_queue ON events`,
		`DROP FUNCTION ledger_pending_add_inserted()`,
		`ALTER TABLE events ENABLE TRIGGER events_ledger_pending`,
		`DELETE FROM schema_migrations WHERE version = 13`,
	} {
		run(t, c, q)
	}
}

// TestMigrationLetsInsertsThroughWhileItWaits: an upgrade that locks
// events against writes (migration 13) waits for the writes in progress,
// and every other writer of events, on every process, queues behind its
// request. Behind a long write (a bulk update, an anti-wraparound vacuum)
// ingest would stop everywhere for as long. The upgrade gives its place up
// after its lock timeout, says so, and tries again: other inserts go
// through meanwhile, and it applies once the long write ends.
func TestMigrationLetsInsertsThroughWhileItWaits(t *testing.T) {
	t.Parallel()
	dsn, _ := atVersion12(t)
	commit := holdWrite(t, dsn)

	var logs syncio.Buffer
	opened := upgradeWith(dsn, loggedUpgrade(&logs, 50*time.Millisecond))
	testwait.For(t, "the upgrade to wait for the write in progress and try again", func() bool {
		return strings.Contains(logs.String(), "trying again")
	})

	// Another process's insert, while the long write is still open.
	other := connect(t, dsn)
	done := make(chan error, 1)
	go func() {
		_, err := other.Exec(context.Background(), insertEvent, store.NewID())
		done <- err
	}()
	var err error
	testwait.For(t, "an insert to go through while the upgrade waits", func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if err != nil {
		t.Fatalf("an insert while the upgrade waits: %v", err)
	}

	commit()
	if err := <-opened; err != nil {
		t.Fatalf("the upgrade after the long write: %v", err)
	}
	if v := query[int64](t, dsn, `SELECT max(version) FROM schema_migrations`); v < 13 {
		t.Fatalf("schema at version %d after the upgrade, want 13 or later", v)
	}
}

// TestMigrationsOfManyProcessesKeepTheirTurn: processes started at once (a
// rolling deploy's new replicas) take turns at the upgrade's advisory
// lock. The one that gives its place on events up behind a long write
// keeps the advisory lock through its pause: had it let it go, the next
// would queue its own request for events at once, the queue would nearly
// always hold one, and every insert would wait a whole lock timeout.
func TestMigrationsOfManyProcessesKeepTheirTurn(t *testing.T) {
	t.Parallel()
	dsn, c := atVersion12(t)
	commit := holdWrite(t, dsn)

	const processes = 4
	var logs syncio.Buffer
	var opened []<-chan error
	for range processes {
		opened = append(opened, upgradeWith(dsn, loggedUpgrade(&logs, 50*time.Millisecond)))
	}
	retries := func() int { return strings.Count(logs.String(), "trying again") }
	// The holder of the upgrade's advisory lock (the bytes of "anyhook"),
	// once the others wait for it.
	turn := func() int32 {
		var pid int32
		testwait.For(t, "one upgrade to hold the advisory lock and the others to wait for it", func() bool {
			var holders, waiting int
			if err := c.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted), coalesce(min(pid) FILTER (WHERE granted), 0)
				FROM pg_locks WHERE locktype = 'advisory' AND classid = x'00616e79'::int::oid AND objid = x'686f6f6b'::int::oid AND objsubid = 1`).Scan(&holders, &waiting, &pid); err != nil {
				t.Fatal(err)
			}
			return holders == 1 && waiting == processes-1
		})
		return pid
	}
	testwait.For(t, "an upgrade to give its place up and try again", func() bool { return retries() >= 1 })
	first := turn()
	seen := retries()
	testwait.For(t, "two more tries", func() bool { return retries() >= seen+2 })
	if now := turn(); now != first {
		t.Fatalf("the advisory lock went from backend %d to %d while the upgrade tried again: each pause let the next process queue for events", first, now)
	}

	commit()
	for _, o := range opened {
		if err := <-o; err != nil {
			t.Fatalf("an upgrade after the long write: %v", err)
		}
	}
}

// insertEvent inserts an event with the id $1, as an older process would.
const insertEvent = `INSERT INTO events (id, source, dedup_key, received_at, method, path, headers, body)
	VALUES ($1, 's', $1, now(), 'POST', '/webhooks/s', '', '{}')`

// holdWrite opens a transaction that has written to events (a write in
// progress: a long bulk update, say) and returns what commits it, which
// runs at the end of t if nobody ran it.
func holdWrite(t *testing.T, dsn string) (commit func()) {
	t.Helper()
	long := connect(t, dsn)
	run(t, long, `BEGIN`)
	run(t, long, insertEvent, store.NewID())
	var once sync.Once
	commit = func() { once.Do(func() { run(t, long, `COMMIT`) }) }
	t.Cleanup(commit)
	return commit
}
