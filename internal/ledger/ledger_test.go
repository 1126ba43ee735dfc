package ledger_test

import (
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	_ "modernc.org/sqlite"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/redirect/redirecttest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// backend is a database the log can live in: SQLite, or PostgreSQL (a
// fresh database per test, skipped without a server; see pgtest). The
// tamper tests run the same SQL on both, through the few expressions that
// differ between the two dialects.
type backend struct {
	name string
	// open returns the gateway's store and a connection behind its back,
	// for tampering.
	open func(t *testing.T, dir string) (store.Store, *sql.DB)
	// rebind turns ? placeholders into the backend's own.
	rebind func(q string) string
	// text and bytes convert a bytes column (body, headers) to text and
	// back, so that SQL can replace a few bytes inside it.
	text, bytes func(expr string) string
	// earlier is the receive time column col moved d into the past.
	earlier func(col string, d time.Duration) string
	// rescan makes the sequencer look at every event again (after the log
	// tables were emptied, or for an event received long ago).
	rescan string
}

var backends = []backend{
	{
		name: "sqlite",
		open: func(t *testing.T, dir string) (store.Store, *sql.DB) {
			path := filepath.Join(dir, "anyhook.db")
			st, err := sqlite.Open(t.Context(), path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { raw.Close() })
			return st, raw
		},
		rebind:  func(q string) string { return q },
		text:    func(x string) string { return "CAST(" + x + " AS TEXT)" },
		bytes:   func(x string) string { return "CAST(" + x + " AS BLOB)" },
		earlier: func(col string, d time.Duration) string { return fmt.Sprintf("%s - %d", col, d.Microseconds()) },
		rescan:  `UPDATE ledger_state SET seq_rowid = 0`,
	},
	{
		name: "postgres",
		open: func(t *testing.T, _ string) (store.Store, *sql.DB) {
			dsn := pgtest.DSN(t)
			// Small pools: the tests run in parallel on one server.
			st, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			raw, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			raw.SetMaxOpenConns(1)
			t.Cleanup(func() { raw.Close() })
			return st, raw
		},
		rebind: func(q string) string {
			var b strings.Builder
			n := 0
			for _, r := range q {
				if r == '?' {
					n++
					fmt.Fprintf(&b, "$%d", n)
					continue
				}
				b.WriteRune(r)
			}
			return b.String()
		},
		text:  func(x string) string { return "convert_from(" + x + ", 'UTF8')" },
		bytes: func(x string) string { return "convert_to(" + x + ", 'UTF8')" },
		earlier: func(col string, d time.Duration) string {
			return fmt.Sprintf("%s - interval '%d microseconds'", col, d.Microseconds())
		},
		rescan: `UPDATE ledger_state SET swept_at = '-infinity'`,
	},
}

// forEachBackend runs fn as a parallel subtest on each backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// forEachEnv runs fn as a parallel subtest on a fresh env of each backend.
func forEachEnv(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	forEachBackend(t, func(t *testing.T, b backend) {
		fn(t, setup(t, b))
	})
}

// env is one database with a log over it.
type env struct {
	backend
	st  store.Store
	key *ledger.Key
	seq *ledger.Sequencer
	cpr *ledger.Checkpointer
	ids []string // event ids in log order once sequenced
	raw *sql.DB  // a connection behind the gateway's back, for tampering
}

func setup(t *testing.T, b backend) *env {
	t.Helper()
	dir := t.TempDir()
	st, raw := b.open(t, dir)
	key, err := ledger.LoadOrCreateKey(filepath.Join(dir, "anyhook-log.key"), "test.example/log")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{backend: b, st: st, key: key, raw: raw}
	e.seq = ledger.NewSequencer(st, ledger.SequencerOptions{BatchSize: 64})
	e.cpr = ledger.NewCheckpointer(st, ledger.CheckpointerOptions{Key: key})
	return e
}

// ingest records n events received now, as ingest would.
func (e *env) ingest(t *testing.T, n int) []string {
	t.Helper()
	return e.ingestAt(t, n, time.Now())
}

// ingestAt records n events received at, each with a delivery to each of
// dests.
func (e *env) ingestAt(t *testing.T, n int, at time.Time, dests ...string) []string {
	t.Helper()
	var evs []store.NewEvent
	for i := range n {
		id := store.NewID()
		evs = append(evs, store.NewEvent{Destinations: dests, Event: anyhook.Event{
			ID: id, Source: "stripe", DedupKey: "evt_" + id, ReceivedAt: at,
			Method: "POST", Path: "/webhooks/stripe",
			Header: http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {fmt.Sprintf("t=1,v1=%d", i)}},
			Body:   fmt.Appendf(nil, `{"id":"evt_%s","n":%d}`, id, i),
		}})
	}
	res, err := e.st.Ingest(t.Context(), evs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// commit sequences everything waiting and signs a checkpoint.
func (e *env) commit(t *testing.T) store.Checkpoint {
	t.Helper()
	if _, err := e.seq.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	cp, _, err := e.cpr.Once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := e.st.LedgerRecords(t.Context(), int64(len(e.ids)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		e.ids = append(e.ids, r.Entry.EventID)
	}
	return cp
}

func (e *env) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := e.raw.ExecContext(t.Context(), e.rebind(q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (e *env) verify(t *testing.T, since []byte) *ledger.Report {
	t.Helper()
	rep, err := ledger.Verify(t.Context(), e.st, ledger.VerifyOptions{Verifier: e.key.Verifier, Origin: e.key.Name(), Since: since})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// named returns the problems about event id.
func named(rep *ledger.Report, id string) []ledger.Problem {
	var out []ledger.Problem
	for _, p := range rep.Problems {
		if p.EventID == id {
			out = append(out, p)
		}
	}
	return out
}

func wantOnly(t *testing.T, rep *ledger.Report, kind string, ids ...string) {
	t.Helper()
	if rep.OK() {
		t.Fatalf("log verified; want %q for %v", kind, ids)
	}
	for _, id := range ids {
		ps := named(rep, id)
		if len(ps) == 0 || !slices.ContainsFunc(ps, func(p ledger.Problem) bool { return p.Kind == kind }) {
			t.Errorf("no %q problem names event %s; problems: %v", kind, id, rep.Problems)
		}
	}
	for _, p := range rep.Problems {
		if p.EventID != "" && !slices.Contains(ids, p.EventID) {
			t.Errorf("an untouched event is named: %v", p)
		}
	}
}

func TestIntactLogVerifies(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		e.ingest(t, 150)
		e.commit(t)
		e.ingest(t, 30) // waiting for the sequencer: fine
		rep := e.verify(t, nil)
		if !rep.OK() {
			t.Fatalf("problems: %v", rep.Problems)
		}
		if rep.Entries != 150 || rep.Checkpoint == nil || rep.Checkpoint.Size != 150 || rep.Waiting != 30 {
			t.Errorf("report = %+v", rep)
		}
		if s := rep.Summary(); !strings.HasPrefix(s, "log intact: 150 events, signed checkpoint at size 150") {
			t.Errorf("summary = %q", s)
		}
	})
}

// TestTamper applies each kind of tampering with SQL in the database (the
// SQLite file, and a PostgreSQL database) and checks that Verify names the
// right events.
func TestTamper(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tamper func(t *testing.T, e *env) (kind string, ids []string)
	}{
		{"body", func(t *testing.T, e *env) (string, []string) {
			e.exec(t, `UPDATE events SET body = ? WHERE id = ?`, []byte(`{"id":"forged"}`), e.ids[7])
			return ledger.KindBodyChanged, e.ids[7:8]
		}},
		{"one byte of the body", func(t *testing.T, e *env) (string, []string) {
			e.exec(t, `UPDATE events SET body = `+e.bytes(`replace(`+e.text(`body`)+`, '"n":', '"N":')`)+` WHERE id = ?`, e.ids[8])
			return ledger.KindBodyChanged, e.ids[8:9]
		}},
		{"header", func(t *testing.T, e *env) (string, []string) {
			e.exec(t, `UPDATE events SET headers = `+e.bytes(`replace(`+e.text(`headers`)+`, 't=', 't=9')`)+` WHERE id = ?`, e.ids[3])
			return ledger.KindHeadersChanged, e.ids[3:4]
		}},
		{"headers replaced by garbage", func(t *testing.T, e *env) (string, []string) {
			e.exec(t, `UPDATE events SET headers = ? WHERE id = ?`, []byte("garbage"), e.ids[9])
			return ledger.KindHeadersChanged, e.ids[9:10]
		}},
		{"receive time", func(t *testing.T, e *env) (string, []string) {
			e.exec(t, `UPDATE events SET received_at = `+e.earlier("received_at", 24*time.Hour)+` WHERE id = ?`, e.ids[11])
			return ledger.KindFieldsChanged, e.ids[11:12]
		}},
		{"dedup key", func(t *testing.T, e *env) (string, []string) {
			e.exec(t, `UPDATE events SET dedup_key = 'evt_other' WHERE id = ?`, e.ids[12])
			return ledger.KindFieldsChanged, e.ids[12:13]
		}},
		{"deleted row", func(t *testing.T, e *env) (string, []string) {
			e.exec(t, `DELETE FROM deliveries WHERE event_id = ?`, e.ids[5])
			e.exec(t, `DELETE FROM events WHERE id = ?`, e.ids[5])
			return ledger.KindDeleted, e.ids[5:6]
		}},
		{"inserted row", func(t *testing.T, e *env) (string, []string) {
			id := store.NewID()
			e.exec(t, `INSERT INTO events (id, source, dedup_key, received_at, method, path, headers, body)
				SELECT ?, source, 'evt_inserted', `+e.earlier("received_at", time.Hour)+`, method, path, headers, body FROM events WHERE id = ?`, id, e.ids[2])
			return ledger.KindInserted, []string{id}
		}},
		{"reordered rows", func(t *testing.T, e *env) (string, []string) {
			a, b := e.ids[20], e.ids[21]
			e.exec(t, `UPDATE events SET id = 'tmp' WHERE id = ?`, a)
			e.exec(t, `UPDATE events SET id = ? WHERE id = ?`, a, b)
			e.exec(t, `UPDATE events SET id = ? WHERE id = 'tmp'`, b)
			return ledger.KindBodyChanged, []string{a, b}
		}},
		{"reordered log entries", func(t *testing.T, e *env) (string, []string) {
			a, b := e.ids[30], e.ids[31]
			e.exec(t, `UPDATE ledger_entries SET event_id = 'tmp' WHERE event_id = ?`, a)
			e.exec(t, `UPDATE ledger_entries SET event_id = ? WHERE event_id = ?`, a, b)
			e.exec(t, `UPDATE ledger_entries SET event_id = ? WHERE event_id = 'tmp'`, b)
			return ledger.KindBodyChanged, []string{a, b}
		}},
		{"event and its log entry rewritten together", func(t *testing.T, e *env) (string, []string) {
			id := e.ids[40]
			e.exec(t, `UPDATE events SET body = ? WHERE id = ?`, []byte(`{}`), id)
			ev, err := e.st.Event(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			leaf := ledger.LeafOf(&ev)
			e.exec(t, `UPDATE ledger_entries SET body_hash = ?, leaf_hash = ? WHERE event_id = ?`, leaf.BodyHash[:], leaf.Hash[:], id)
			return ledger.KindEntryChanged, []string{id}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forEachEnv(t, func(t *testing.T, e *env) {
				e.ingest(t, 60)
				e.commit(t)
				if rep := e.verify(t, nil); !rep.OK() {
					t.Fatalf("before tampering: %v", rep.Problems)
				}
				kind, ids := tt.tamper(t, e)
				rep := e.verify(t, nil)
				wantOnly(t, rep, kind, ids...)
				for _, p := range rep.Problems {
					t.Log(p)
				}
			})
		})
	}
}

// TestInsertedWhileRunning: a row inserted behind a running gateway's back
// gets a log position from the sequencer, but is flagged and reported.
func TestInsertedWhileRunning(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		var mu sync.Mutex
		var late []string
		e.seq = ledger.NewSequencer(e.st, ledger.SequencerOptions{OnLate: func(ev anyhook.Event) {
			mu.Lock()
			late = append(late, ev.ID)
			mu.Unlock()
		}})
		e.ingest(t, 10)
		e.commit(t)
		id := store.NewID()
		e.exec(t, `INSERT INTO events (id, source, dedup_key, received_at, method, path, headers, body)
		SELECT ?, source, 'evt_backdated', `+e.earlier("received_at", time.Hour)+`, method, path, headers, body FROM events WHERE id = ?`, id, e.ids[0])
		// PostgreSQL's sequencer looks for events received long ago in a sweep
		// every few minutes: bring it forward. (SQLite's finds them by rowid.)
		e.exec(t, e.rescan)
		e.ingest(t, 5)
		e.commit(t)
		if !slices.Equal(late, []string{id}) {
			t.Errorf("OnLate saw %v, want [%s]", late, id)
		}
		wantOnly(t, e.verify(t, nil), ledger.KindInserted, id)
	})
}

// TestLatenessFromSignedTimes: a back-dated row inserted behind the
// gateway's back, after a checkpoint signed at a time that should have
// held it, is reported from the signed time alone: clearing the stored
// late flag hides nothing. Checkpoints without a time line (signed before
// AnyHook wrote one) still verify; for entries only they judge, the flag is
// all there is.
func TestLatenessFromSignedTimes(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		clock := time.Now().Truncate(time.Second) // the checkpointer's and the verifier's clock
		e.cpr = ledger.NewCheckpointer(e.st, ledger.CheckpointerOptions{Key: e.key, Now: func() time.Time { return clock }})
		verify := func() *ledger.Report {
			t.Helper()
			rep, err := ledger.Verify(t.Context(), e.st, ledger.VerifyOptions{Verifier: e.key.Verifier, Origin: e.key.Name(), Now: func() time.Time { return clock }})
			if err != nil {
				t.Fatal(err)
			}
			return rep
		}
		backdate := func(ago time.Duration) string {
			t.Helper()
			id := store.NewID()
			e.exec(t, `INSERT INTO events (id, source, dedup_key, received_at, method, path, headers, body)
				SELECT ?, source, ?, `+e.earlier("received_at", ago)+`, method, path, headers, body FROM events WHERE id = ?`, id, "evt_"+id, e.ids[0])
			e.exec(t, e.rescan)
			return id
		}

		// An old log: its checkpoint has no time line. It verifies; a
		// back-dated insert is reported only through the sequencer's flag.
		e.ingest(t, 10)
		if _, err := e.seq.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		root, err := tlog.TreeHash(10, ledger.HashReader(t.Context(), e.st))
		if err != nil {
			t.Fatal(err)
		}
		old, err := ledger.SignCheckpoint(e.key, ledger.Tree{Origin: e.key.Name(), Size: 10, Root: root})
		if err != nil || strings.Contains(string(old), "\ntime ") {
			t.Fatalf("a checkpoint without a time: %q, %v", old, err)
		}
		if err := e.st.SaveCheckpoint(t.Context(), store.Checkpoint{Size: 10, Root: root, Note: old}); err != nil {
			t.Fatal(err)
		}
		e.commit(t)
		if rep := verify(); !rep.OK() || rep.Checkpoint == nil || !rep.Checkpoint.Time.IsZero() {
			t.Fatalf("a log with an untimed checkpoint: report %+v, problems %v", rep, rep.Problems)
		}
		oldInsert := backdate(time.Hour)
		e.commit(t) // signed at clock, with a time line: it holds the insert
		rep := verify()
		wantOnly(t, rep, ledger.KindInserted, oldInsert)
		if !hasProblem(rep, ledger.KindInserted, "flagged by the sequencer") {
			t.Errorf("judged by the flag: %v", rep.Problems)
		}

		// A timed log: checkpoint 3 (size 16) is signed a minute later; then
		// a row back-dated by two hours turns up.
		clock = clock.Add(time.Minute)
		e.ingest(t, 5)
		e.commit(t)
		id := backdate(2 * time.Hour)
		e.ingest(t, 5)
		e.commit(t)
		e.exec(t, `UPDATE ledger_entries SET late = ? WHERE event_id IN (?, ?)`, false, id, oldInsert)
		rep = verify()
		for _, p := range rep.Problems {
			t.Log(p)
		}
		wantOnly(t, rep, ledger.KindInserted, id)
		if !hasProblem(rep, ledger.KindInserted, "more than 5 minutes before checkpoint 3 was signed ("+clock.UTC().Format(time.RFC3339)+"), which did not hold it") {
			t.Errorf("not judged by the signed time: %v", rep.Problems)
		}
		// The old insert, judged by the untimed checkpoint only, is no
		// longer reported once its flag is cleared: the limit of old logs.
		if len(named(rep, oldInsert)) != 0 {
			t.Errorf("the old insert is named: %v", named(rep, oldInsert))
		}
	})
}

// TestCheckpointTimeLine: the signing time is an extension line of the
// signed text; one that is malformed or repeated makes the checkpoint
// unreadable, other extension lines are ignored.
func TestCheckpointTimeLine(t *testing.T) {
	t.Parallel()
	key, err := ledger.LoadOrCreateKey(filepath.Join(t.TempDir(), "k"), "test.example/log")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-90 * time.Minute).Round(time.Millisecond) // sub-second: dropped
	tr := ledger.Tree{Origin: "test.example/log", Size: 7, Root: sha256.Sum256([]byte("r")), Time: at}
	text := ledger.CheckpointText(tr)
	want := "test.example/log\n7\n" + b64(tr.Root) + "\ntime " + at.UTC().Truncate(time.Second).Format(time.RFC3339) + "\n"
	if text != want || !strings.HasSuffix(text, "Z\n") {
		t.Fatalf("CheckpointText = %q, want %q", text, want)
	}
	msg, err := ledger.SignCheckpoint(key, tr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ledger.OpenCheckpoint(msg, key.Verifier)
	if err != nil || !got.Time.Equal(at.Truncate(time.Second)) || got.Size != 7 {
		t.Fatalf("OpenCheckpoint = %+v, %v", got, err)
	}
	base := "o\n7\n" + b64(tr.Root) + "\n"
	stamp := "time " + at.UTC().Truncate(time.Second).Format(time.RFC3339) + "\n"
	for text, ok := range map[string]bool{
		base:                               true,
		base + "other extension\n" + stamp: true,
		base + stamp + stamp:               false,
		base + "time yesterday\n":          false,
		base + "time " + at.Format(time.RFC3339Nano) + "\n":                           false,
		base + "time " + at.In(time.FixedZone("x", 3600)).Format(time.RFC3339) + "\n": false,
	} {
		if _, err := ledger.ParseCheckpointText(text); (err == nil) != ok {
			t.Errorf("ParseCheckpointText(%q) err = %v, want ok %v", text, err, ok)
		}
	}
}

func TestForgedCheckpoint(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		e.ingest(t, 20)
		cp := e.commit(t)
		edits := map[string]func(string) string{
			"size": func(s string) string { return strings.Replace(s, "\n20\n", "\n19\n", 1) },
			"root": func(s string) string {
				lines := strings.SplitN(s, "\n", 4)
				lines[2] = b64(sha256.Sum256([]byte("forged")))
				return strings.Join(lines, "\n")
			},
		}
		for what, edit := range edits {
			forged := edit(string(cp.Note))
			if forged == string(cp.Note) {
				t.Fatalf("%s: the edit changed nothing", what)
			}
			if _, err := ledger.OpenCheckpoint([]byte(forged), e.key.Verifier); !errors.Is(err, ledger.ErrBadCheckpoint) {
				t.Errorf("%s edited: OpenCheckpoint err = %v, want ErrBadCheckpoint", what, err)
			}
			// As a --checkpoint file …
			rep := e.verify(t, []byte(forged))
			if rep.OK() || rep.Problems[0].Kind != ledger.KindCheckpoint {
				t.Errorf("%s edited, as --checkpoint: problems %v", what, rep.Problems)
			}
			// … and in the database.
			e.exec(t, `UPDATE ledger_checkpoints SET note = ? WHERE id = (SELECT max(id) FROM ledger_checkpoints)`, []byte(forged))
			rep = e.verify(t, nil)
			if rep.OK() || rep.Problems[0].Kind != ledger.KindCheckpoint {
				t.Errorf("%s edited in the database: problems %v", what, rep.Problems)
			}
			e.exec(t, `UPDATE ledger_checkpoints SET note = ? WHERE id = (SELECT max(id) FROM ledger_checkpoints)`, cp.Note)
		}
		// Signed by another key.
		other, err := ledger.LoadOrCreateKey(filepath.Join(t.TempDir(), "k"), "test.example/log")
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := ledger.SignCheckpoint(other, ledger.Tree{Origin: e.key.Name(), Size: cp.Size, Root: cp.Root})
		if rep := e.verify(t, msg); rep.OK() {
			t.Error("a checkpoint signed by another key verified")
		}
	})
}

// TestConsistency: a checkpoint kept at size 100 (by a witness), then 200
// more events: the log proves it only grew. Rewriting event 50 then fails
// against the old checkpoint, even when the rewriter also rebuilt the log
// and re-signed it with the key.
func TestConsistency(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		e.ingest(t, 100)
		old := e.commit(t)
		if old.Size != 100 {
			t.Fatalf("checkpoint size %d", old.Size)
		}
		witness := filepath.Join(t.TempDir(), "checkpoint")
		os.WriteFile(witness, old.Note, 0o644)
		e.ingest(t, 120)
		e.commit(t)
		e.ingest(t, 80)
		e.commit(t)
		kept, _ := os.ReadFile(witness)
		rep := e.verify(t, kept)
		if !rep.OK() || rep.Since == nil || rep.Since.Size != 100 || rep.Checkpoint.Size != 300 {
			t.Fatalf("report %+v, problems %v", rep, rep.Problems)
		}

		id50 := e.ids[50]
		e.exec(t, `UPDATE events SET body = ? WHERE id = ?`, []byte(`{"amount":1}`), id50)
		rep = e.verify(t, kept)
		if len(named(rep, id50)) == 0 {
			t.Errorf("event 50 not named: %v", rep.Problems)
		}
		if !slices.ContainsFunc(rep.Problems, func(p ledger.Problem) bool { return p.Kind == ledger.KindRewritten && p.EventID == "" }) {
			t.Errorf("no rewrite reported against the old checkpoint: %v", rep.Problems)
		}

		// The key holder rebuilds the whole log over the edited event and signs
		// it: the database is consistent with itself again …
		e.exec(t, `DELETE FROM ledger_entries`)
		e.exec(t, `DELETE FROM ledger_hashes`)
		e.exec(t, `DELETE FROM ledger_checkpoints`)
		e.exec(t, e.rescan)
		e.ids = nil
		// (with a process of their own: the running checkpointer remembers
		// what it signed and signs no rewrite, TestCheckpointerSignsNoFork)
		e.cpr = ledger.NewCheckpointer(e.st, ledger.CheckpointerOptions{Key: e.key})
		e.commit(t)
		if rep := e.verify(t, nil); !rep.OK() {
			t.Fatalf("rebuilt log: %v", rep.Problems)
		}
		// … but not with the checkpoint the witness kept.
		rep = e.verify(t, kept)
		if rep.OK() {
			t.Fatal("the rebuilt log proves consistent with the old checkpoint")
		}
		t.Log(rep.Problems)
	})
}

// cutBack does what an attacker with write access to the database does to
// take back events: it deletes the events at log positions >= n with their
// log entries and the tree's stored hashes beyond size n, leaving a log of
// n entries that is consistent with itself.
func (e *env) cutBack(t *testing.T, n int64) {
	t.Helper()
	e.exec(t, `DELETE FROM deliveries WHERE event_id IN (SELECT event_id FROM ledger_entries WHERE idx >= ?)`, n)
	e.exec(t, `DELETE FROM events WHERE id IN (SELECT event_id FROM ledger_entries WHERE idx >= ?)`, n)
	e.exec(t, `DELETE FROM ledger_entries WHERE idx >= ?`, n)
	e.exec(t, `DELETE FROM ledger_hashes WHERE idx >= ?`, tlog.StoredHashCount(n))
	e.ids = e.ids[:n]
}

// hasProblem reports whether rep has a problem of kind whose detail
// contains text.
func hasProblem(rep *ledger.Report, kind, text string) bool {
	return slices.ContainsFunc(rep.Problems, func(p ledger.Problem) bool {
		return p.Kind == kind && strings.Contains(p.Detail, text)
	})
}

// TestRollback: events 20–39 are deleted with their log entries and stored
// hashes, and a copy of the old size-20 checkpoint is put back as the
// newest row, so that the latest checkpoint matches the shortened log.
// Every stored checkpoint is checked, so the larger one before it gives
// the rollback away. An attacker who also deletes the larger checkpoints
// leaves a database consistent with itself: only a checkpoint kept outside
// it (--checkpoint, a push_url witness) catches that (docs/ledger.md,
// threat model).
func TestRollback(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, alsoDeleteLater := range []bool{false, true} {
			e := setup(t, b)
			e.ingest(t, 20)
			if cp := e.commit(t); cp.Size != 20 {
				t.Fatalf("checkpoint size %d", cp.Size)
			}
			e.ingest(t, 20)
			witnessed := e.commit(t) // size 40, pushed to a witness
			if rep := e.verify(t, nil); !rep.OK() {
				t.Fatalf("before the rollback: %v", rep.Problems)
			}
			gone := slices.Clone(e.ids[20:])
			e.cutBack(t, 20)
			if alsoDeleteLater {
				e.exec(t, `DELETE FROM ledger_checkpoints WHERE size > 20`)
			} else {
				e.exec(t, `INSERT INTO ledger_checkpoints (size, root, note, created_at)
					SELECT size, root, note, created_at FROM ledger_checkpoints WHERE size = 20`)
			}
			rep := e.verify(t, nil)
			for _, p := range rep.Problems {
				t.Log(p)
			}
			for _, id := range gone {
				if len(named(rep, id)) != 0 {
					t.Errorf("a deleted event is named, but nothing about it is left: %v", named(rep, id))
				}
			}
			if alsoDeleteLater {
				// The limit: the database alone no longer shows it …
				if !rep.OK() || rep.Entries != 20 || rep.Checkpoint == nil || rep.Checkpoint.Size != 20 {
					t.Fatalf("rolled back with the later checkpoints deleted: report %+v, problems %v", rep, rep.Problems)
				}
				// … the checkpoint a witness kept does.
				rep = e.verify(t, witnessed.Note)
				if !hasProblem(rep, ledger.KindRewritten, "the given checkpoint says 40 entries, the log has 20: entries were removed") {
					t.Errorf("against the witnessed checkpoint: problems %v", rep.Problems)
				}
				continue
			}
			if rep.OK() || rep.Checkpoint == nil || rep.Checkpoint.Size != 20 {
				t.Fatalf("rolled back log: report %+v, problems %v", rep, rep.Problems)
			}
			if !hasProblem(rep, ledger.KindRewritten, "checkpoint 3 (size 20) is smaller than an earlier one (size 40): the log was rolled back") {
				t.Errorf("the rollback is not named: %v", rep.Problems)
			}
			if !hasProblem(rep, ledger.KindRewritten, "checkpoint 2 says 40 entries, the log has 20: entries were removed") {
				t.Errorf("the removed entries are not reported: %v", rep.Problems)
			}
		}
	})
}

// TestCheckpointerSignsNoFork: whoever can write the database, without
// the key, deletes the checkpoints after an older one, edits an event after
// it and rebuilds the log entries and stored hashes from there (a log
// consistent with the older checkpoint), and waits for the running
// checkpointer to sign it. Before, it did — a second, different checkpoint
// of size 10 from the same process — and log verify, without a witness's
// copy of the first, found the log intact. The checkpointer remembers what
// it signed, outside the database: it signs nothing and reports a
// verification failure. (A restarted process has forgotten; only a
// witness catches the rewrite then: docs/ledger.md, threat model.)
func TestCheckpointerSignsNoFork(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		e.ingest(t, 5)
		e.commit(t)
		e.ingest(t, 5)
		first := e.commit(t) // size 10
		if first.Size != 10 {
			t.Fatalf("checkpoint size %d", first.Size)
		}
		e.exec(t, `DELETE FROM ledger_checkpoints WHERE size > 5`)
		e.exec(t, `UPDATE events SET body = ? WHERE id = ?`, []byte(`{"id":"forged"}`), e.ids[7])
		e.exec(t, `DELETE FROM ledger_entries WHERE idx >= 5`)
		e.exec(t, `DELETE FROM ledger_hashes WHERE idx >= ?`, tlog.StoredHashCount(5))
		e.exec(t, e.rescan)
		if _, err := e.seq.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n, err := e.st.LedgerSize(t.Context()); err != nil || n != 10 {
			t.Fatalf("re-sequenced log: size %d, %v", n, err)
		}
		cp, fresh, err := e.cpr.Once(t.Context())
		var vf *ledger.VerificationError
		if fresh || !errors.As(err, &vf) {
			t.Fatalf("the checkpointer signed the rewritten log: checkpoint of size %d (new: %v), err %v", cp.Size, fresh, err)
		}
		t.Log(err)
		if rep := e.verify(t, first.Note); rep.OK() {
			t.Error("the rewrite verifies against the first checkpoint")
		}
	})
}

// TestEveryCheckpointChecked: the root of every stored checkpoint, not
// only the latest, must be the events' root at its size, and each must be
// signed; a rewritten event is reported once for all the checkpoints it
// puts out.
func TestEveryCheckpointChecked(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		for range 4 {
			e.ingest(t, 10)
			e.commit(t)
		}
		// An older checkpoint swapped for one of another log (same key,
		// same size, another root): the latest still matches.
		other := sha256.Sum256([]byte("another log"))
		msg, err := ledger.SignCheckpoint(e.key, ledger.Tree{Origin: e.key.Name(), Size: 20, Root: other})
		if err != nil {
			t.Fatal(err)
		}
		e.exec(t, `UPDATE ledger_checkpoints SET note = ? WHERE size = 20`, msg)
		rep := e.verify(t, nil)
		if !hasProblem(rep, ledger.KindRewritten, "at size 20, the signed checkpoint 2 says "+b64(other)) || len(rep.Problems) != 1 {
			t.Errorf("a forked older checkpoint: problems %v", rep.Problems)
		}
		// An older checkpoint that does not verify.
		e.exec(t, `UPDATE ledger_checkpoints SET note = ? WHERE size = 20`, []byte("garbage"))
		rep = e.verify(t, nil)
		if !hasProblem(rep, ledger.KindCheckpoint, "checkpoint 2: ") || len(rep.Problems) != 1 {
			t.Errorf("an unsigned older checkpoint: problems %v", rep.Problems)
		}
		e.exec(t, `DELETE FROM ledger_checkpoints WHERE size = 20`)
		// Event 5 rewritten: checkpoints 1, 3 and 4 all disagree; one problem
		// names the first.
		e.exec(t, `UPDATE events SET body = ? WHERE id = ?`, []byte(`{}`), e.ids[5])
		rep = e.verify(t, nil)
		wantOnly(t, rep, ledger.KindBodyChanged, e.ids[5])
		if !hasProblem(rep, ledger.KindRewritten, "at size 10, the signed checkpoint 1 says") ||
			!hasProblem(rep, ledger.KindRewritten, "(and 2 later checkpoints disagree too)") {
			t.Errorf("problems %v", rep.Problems)
		}
	})
}

// TestMissingCheckpoints: entries that no stored checkpoint covers are fine
// while fresh (the checkpointer signs every few seconds; a gateway may just
// have started), and reported once they were sequenced over an hour ago:
// the checkpoints holding them were deleted, or no checkpointer runs.
func TestMissingCheckpoints(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		// Sequenced, never checkpointed, fresh.
		e.ingest(t, 20)
		if _, err := e.seq.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		rep := e.verify(t, nil)
		if !rep.OK() || rep.Entries != 20 || rep.Checkpoint != nil || !strings.Contains(rep.Summary(), "no checkpoint yet") {
			t.Fatalf("fresh log without checkpoints: report %+v, problems %v", rep, rep.Problems)
		}
		// Checkpointed and an hour old, and 10 fresh entries not checkpointed
		// yet: fine.
		e.commit(t)
		age := func() {
			e.exec(t, `UPDATE ledger_entries SET sequenced_at = `+e.earlier("sequenced_at", 2*time.Hour))
		}
		age()
		e.ingest(t, 10)
		if _, err := e.seq.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if rep := e.verify(t, nil); !rep.OK() || rep.Entries != 30 || rep.Checkpoint.Size != 20 {
			t.Fatalf("old log, fresh entries past the checkpoint: report %+v, problems %v", rep, rep.Problems)
		}
		// Those too become old: the checkpointer has not run for an hour.
		age()
		rep = e.verify(t, nil)
		if !hasProblem(rep, ledger.KindMissingCheckpoint, "entries 20.. are in no signed checkpoint although sequenced over an hour ago") || len(rep.Problems) != 1 {
			t.Errorf("old entries past the checkpoint: problems %v", rep.Problems)
		}
		// Every checkpoint deleted.
		e.commit(t)
		if rep := e.verify(t, nil); !rep.OK() {
			t.Fatalf("checkpointed again: %v", rep.Problems)
		}
		e.exec(t, `DELETE FROM ledger_checkpoints`)
		rep = e.verify(t, nil)
		for _, p := range rep.Problems {
			t.Log(p)
		}
		if !hasProblem(rep, ledger.KindMissingCheckpoint, "entries 0.. are in no signed checkpoint although sequenced over an hour ago: checkpoints were deleted or the checkpointer is not running") || len(rep.Problems) != 1 {
			t.Errorf("all checkpoints deleted: problems %v", rep.Problems)
		}
	})
}

func TestPrunedBodiesStillVerify(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		e.ingest(t, 40)
		e.commit(t)
		n, err := ledger.Prune(t.Context(), e.st, time.Now().Add(time.Hour))
		if err != nil || n != 40 {
			t.Fatalf("Prune = %d, %v", n, err)
		}
		ev, _ := e.st.Event(t.Context(), e.ids[3])
		if len(ev.Body) != 0 {
			t.Fatal("body not pruned")
		}
		e.ingest(t, 5)
		e.commit(t)
		rep := e.verify(t, nil)
		if !rep.OK() || rep.Pruned != 40 {
			t.Fatalf("report %+v, problems %v", rep, rep.Problems)
		}
		// A proof still checks, with the logged body hash standing in.
		p, err := ledger.Prove(t.Context(), e.st, e.ids[3])
		if err != nil {
			t.Fatal(err)
		}
		if err := ledger.CheckProof(e.key.Verifier, &ev, p); err != nil {
			t.Errorf("CheckProof of a pruned event: %v", err)
		}
		// Headers of a pruned event are still covered.
		e.exec(t, `UPDATE events SET headers = `+e.bytes(`replace(`+e.text(`headers`)+`, 'application/json', 'text/plain')`)+` WHERE id = ?`, e.ids[4])
		wantOnly(t, e.verify(t, nil), ledger.KindHeadersChanged, e.ids[4])
	})
}

// TestPrunedOutsideRetention: pruning that the retention rule did (an old
// body, nothing left to deliver) verifies; a body emptied and marked pruned
// by SQL while it is younger than log.retention, or while a dead delivery
// still needs it, is reported. With log.retention 0s every pruned body is.
func TestPrunedOutsideRetention(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		now := time.Now()
		const retention = 30 * 24 * time.Hour
		verify := func(ret time.Duration) *ledger.Report {
			t.Helper()
			rep, err := ledger.Verify(t.Context(), e.st, ledger.VerifyOptions{Verifier: e.key.Verifier, Origin: e.key.Name(),
				Retention: ret, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			return rep
		}
		prune := func(id string) {
			e.exec(t, `UPDATE events SET body = ? WHERE id = ?`, []byte{}, id)
			e.exec(t, `UPDATE ledger_entries SET body_pruned = ? WHERE event_id = ?`, true, id)
		}
		old := now.Add(-40 * 24 * time.Hour)
		e.ingestAt(t, 20, old)
		dead := e.ingestAt(t, 1, old, "billing")[0]
		cs, err := e.st.Claim(t.Context(), "billing", 1, time.Minute)
		if err != nil || len(cs) != 1 {
			t.Fatalf("Claim = %v, %v", cs, err)
		}
		if _, err := e.st.Finish(t.Context(), []store.Outcome{{DeliveryID: cs[0].Delivery.ID, Attempt: 1, Status: anyhook.StatusDead,
			Result: anyhook.Attempt{Number: 1, StartedAt: now, StatusCode: 500, Error: "HTTP 500"}}}); err != nil {
			t.Fatal(err)
		}
		e.commit(t)
		young := e.ingest(t, 5)
		e.commit(t)
		// Retention, as the checkpointer runs it.
		if n, err := ledger.Prune(t.Context(), e.st, now.Add(-retention)); err != nil || n != 20 {
			t.Fatalf("Prune = %d, %v; want the 20 old bodies without a delivery needing them", n, err)
		}
		if rep := verify(retention); !rep.OK() || rep.Pruned != 20 {
			t.Fatalf("after genuine pruning: report %+v, problems %v", rep, rep.Problems)
		}
		// A young body pruned by hand, and the old body a dead delivery needs.
		prune(young[2])
		prune(dead)
		rep := verify(retention)
		for _, p := range rep.Problems {
			t.Log(p)
		}
		wantOnly(t, rep, ledger.KindPrunedEarly, young[2], dead)
		if !hasProblem(rep, ledger.KindPrunedEarly, "less than log.retention (30 days) ago: retention cannot have pruned it yet") ||
			!hasProblem(rep, ledger.KindPrunedEarly, "although a delivery still needs it") || len(rep.Problems) != 2 {
			t.Errorf("problems %v", rep.Problems)
		}
		// log.retention: 0s keeps every body: every pruned one is reported.
		if rep := verify(ledger.RetainForever); len(rep.Problems) != 23 || !hasProblem(rep, ledger.KindPrunedEarly, "log.retention is 0s") {
			t.Errorf("with retention 0s: %d problems, %v", len(rep.Problems), rep.Problems)
		}
	})
}

func TestProof(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		e.ingest(t, 37)
		e.commit(t)
		pending := e.ingest(t, 1)[0]
		for _, i := range []int{0, 1, 17, 36} {
			p, err := ledger.Prove(t.Context(), e.st, e.ids[i])
			if err != nil {
				t.Fatal(err)
			}
			if p.Index != int64(i) || p.TreeSize != 37 {
				t.Errorf("proof %+v", p)
			}
			ev, _ := e.st.Event(t.Context(), e.ids[i])
			if err := ledger.CheckProof(e.key.Verifier, &ev, p); err != nil {
				t.Errorf("CheckProof(%d): %v", i, err)
			}
			ev.Body = append(ev.Body, ' ')
			if err := ledger.CheckProof(e.key.Verifier, &ev, p); err == nil {
				t.Errorf("CheckProof(%d) accepted an edited body", i)
			}
		}
		if _, err := ledger.Prove(t.Context(), e.st, pending); !errors.Is(err, anyhook.ErrNotFound) {
			t.Errorf("Prove(not yet sequenced) err = %v", err)
		}
		e.seq.Run(t.Context())
		if _, err := ledger.Prove(t.Context(), e.st, pending); !errors.Is(err, anyhook.ErrNotFound) {
			t.Errorf("Prove(not yet in a checkpoint) err = %v", err)
		}
	})
}

func TestSelfCheckFails(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		var failures []error
		e.cpr = ledger.NewCheckpointer(e.st, ledger.CheckpointerOptions{Key: e.key, OnFailure: func(err error) { failures = append(failures, err) }})
		e.ingest(t, 10)
		e.commit(t)
		// An event changed between sequencing and the next checkpoint.
		fresh := e.ingest(t, 3)
		if _, err := e.seq.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.exec(t, `UPDATE events SET body = ? WHERE id = ?`, []byte("x"), fresh[1])
		_, _, err := e.cpr.Once(t.Context())
		var vf *ledger.VerificationError
		if !errors.As(err, &vf) || vf.EventID != fresh[1] {
			t.Fatalf("Once err = %v, want a verification error naming %s", err, fresh[1])
		}
		// The stored tree rewritten under the checkpoint.
		e2 := setup(t, e.backend)
		e2.ingest(t, 10)
		e2.commit(t)
		e2.exec(t, `UPDATE ledger_hashes SET hash = ?`, make([]byte, 32))
		e2.ingest(t, 1)
		e2.seq.Run(t.Context())
		if _, _, err := e2.cpr.Once(t.Context()); !errors.As(err, &vf) {
			t.Fatalf("Once err = %v, want a verification error", err)
		}
		// The loop reports it through OnFailure.
		e.cpr.Start(t.Context())
		e.cpr.Stop()
		e.cpr.Stop() // idempotent
		if len(failures) == 0 {
			t.Error("OnFailure not called")
		}
	})
}

func TestLoopsDrainAtStop(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		pushed := make(chan []byte, 10)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			pushed <- b
		}))
		defer srv.Close()
		e.seq = ledger.NewSequencer(e.st, ledger.SequencerOptions{Interval: time.Hour})
		e.cpr = ledger.NewCheckpointer(e.st, ledger.CheckpointerOptions{Key: e.key, Interval: time.Hour, PushURL: srv.URL})
		e.seq.Start(t.Context())
		e.cpr.Start(t.Context())
		e.ingest(t, 25)
		e.seq.Stop() // the last round sequences what is waiting
		e.cpr.Stop() // and the last checkpoint covers it
		e.seq.Stop()
		rep := e.verify(t, nil)
		if !rep.OK() || rep.Checkpoint == nil || rep.Checkpoint.Size != 25 {
			t.Fatalf("report %+v, problems %v", rep, rep.Problems)
		}
		var last []byte
		for len(pushed) > 0 {
			last = <-pushed
		}
		tr, err := ledger.OpenCheckpoint(last, e.key.Verifier)
		if err != nil || tr.Size != 25 {
			t.Errorf("pushed checkpoint: %+v, %v", tr, err)
		}
	})
}

// TestFailedPushIsPushedAgain: a checkpoint whose push failed (a witness
// down, a push cut off by shutdown) is pushed again by the next round, so
// the witness ends with the latest checkpoint.
func TestFailedPushIsPushedAgain(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	pushed := make(chan []byte, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if calls.Add(1) == 1 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		pushed <- b
	}))
	defer srv.Close()
	e := setup(t, backends[0])
	e.ingest(t, 3)
	e.seq.Run(t.Context())
	e.cpr = ledger.NewCheckpointer(e.st, ledger.CheckpointerOptions{Key: e.key, Interval: time.Hour, PushURL: srv.URL})
	if _, fresh, err := e.cpr.Once(t.Context()); !fresh || err != nil {
		t.Fatalf("Once = %v, %v; want a new checkpoint", fresh, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d pushes, want the one that failed", n)
	}
	e.cpr.Start(t.Context()) // its rounds sign nothing new and push again
	e.cpr.Stop()
	if len(pushed) == 0 {
		t.Fatal("the failed push was not pushed again")
	}
	tr, err := ledger.OpenCheckpoint(<-pushed, e.key.Verifier)
	if err != nil || tr.Size != 3 {
		t.Errorf("pushed again: %+v, %v", tr, err)
	}
}

// TestKeyPinning: the first key to start on a database becomes the log's
// key; another one is refused, also when several start at once, and also
// on a log that has checkpoints but no recorded key yet (a database from
// before keys were recorded): the key must verify its latest checkpoint.
func TestKeyPinning(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		keys := make([]*ledger.Key, 6)
		for i := range keys {
			keys[i] = newKey(t)
		}
		errs := make([]error, len(keys))
		var wg sync.WaitGroup
		for i := range keys {
			wg.Go(func() { errs[i] = ledger.PinKey(t.Context(), e.st, keys[i]) })
		}
		wg.Wait()
		var won []int
		for i, err := range errs {
			var km *ledger.KeyMismatchError
			switch {
			case err == nil:
				won = append(won, i)
			case !errors.As(err, &km) || !strings.Contains(err.Error(), "is not this log's key") || km.InUse == "":
				t.Errorf("starter %d: err = %v, want a key mismatch", i, err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("%d starters' keys accepted, want exactly 1: %v", len(won), errs)
		}
		winner := keys[won[0]]
		if got, err := e.st.LedgerKeys(t.Context()); err != nil || !slices.Equal(got, []string{winner.VerifierKey}) {
			t.Fatalf("LedgerKeys = %v, %v", got, err)
		}
		if err := ledger.PinKey(t.Context(), e.st, winner); err != nil {
			t.Errorf("the log's own key again: %v", err)
		}

		// An older database: checkpoints, no recorded key.
		e2 := setup(t, e.backend)
		e2.ingest(t, 5)
		e2.commit(t)
		e2.exec(t, `DELETE FROM ledger_keys`)
		var km *ledger.KeyMismatchError
		if err := ledger.PinKey(t.Context(), e2.st, newKey(t)); !errors.As(err, &km) || !strings.Contains(err.Error(), "not the one this log was signed with") {
			t.Errorf("another key on a log with checkpoints: err = %v", err)
		}
		if err := ledger.PinKey(t.Context(), e2.st, e2.key); err != nil {
			t.Errorf("the key of its checkpoints: %v", err)
		}
	})
}

// TestKeyRotation: rotate-key hands the log to a new key with a checkpoint
// signed by both. The old key signs nothing more; the log verifies with
// either key pinned (each learns the other from the handover), not with a
// stranger's; the handover deleted, or a checkpoint the old key signed
// after it, is reported.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		if err := ledger.PinKey(t.Context(), e.st, e.key); err != nil {
			t.Fatal(err)
		}
		e.ingest(t, 10)
		e.commit(t)
		e.ingest(t, 3) // not yet in a checkpoint: the handover covers them
		if _, err := e.seq.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		next, err := ledger.LoadOrCreateKey(filepath.Join(t.TempDir(), "next.key"), e.key.Name())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ledger.Rotate(t.Context(), e.st, next, newKey(t), ledger.RotateOptions{}); err == nil {
			t.Fatal("a rotation from a key that is not the log's went through")
		}
		cp, err := ledger.Rotate(t.Context(), e.st, e.key, next, ledger.RotateOptions{Origin: e.key.Name()})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := ledger.OpenCheckpoint(cp.Note, next.Verifier)
		if err != nil || tr.Size != 13 || tr.Rotation == nil || tr.Rotation.From != e.key.VerifierKey || tr.Rotation.To != next.VerifierKey {
			t.Fatalf("handover checkpoint %+v, %v", tr, err)
		}
		if _, err := ledger.OpenCheckpoint(cp.Note, e.key.Verifier); err != nil {
			t.Fatalf("the handover is not signed by the old key: %v", err)
		}
		if err := ledger.PinKey(t.Context(), e.st, e.key); err == nil {
			t.Error("the old key still starts")
		}
		if err := ledger.PinKey(t.Context(), e.st, next); err != nil {
			t.Errorf("the new key does not start: %v", err)
		}
		// A gateway left running with the old key signs nothing more.
		e.ingest(t, 4)
		if _, err := e.seq.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, fresh, err := e.cpr.Once(t.Context()); !errors.Is(err, ledger.ErrKeyRetired) || fresh {
			t.Fatalf("checkpoint with the retired key: new %v, err %v", fresh, err)
		}
		e.cpr = ledger.NewCheckpointer(e.st, ledger.CheckpointerOptions{Key: next, Origin: e.key.Name()})
		e.commit(t)

		verifyWith := func(v note.Verifier) *ledger.Report {
			t.Helper()
			rep, err := ledger.Verify(t.Context(), e.st, ledger.VerifyOptions{Verifier: v, Origin: e.key.Name()})
			if err != nil {
				t.Fatal(err)
			}
			return rep
		}
		for name, v := range map[string]note.Verifier{"old": e.key.Verifier, "new": next.Verifier} {
			if rep := verifyWith(v); !rep.OK() || rep.Checkpoint == nil || rep.Checkpoint.Size != 17 {
				t.Errorf("verified with the %s key: report %+v, problems %v", name, rep, rep.Problems)
			}
		}
		if rep := verifyWith(newKey(t).Verifier); rep.OK() {
			t.Error("verified with a stranger's key")
		}

		// The old key (stolen, say) signs a checkpoint after the handover.
		root, _ := tlog.TreeHash(17, ledger.HashReader(t.Context(), e.st))
		forged, _ := ledger.SignCheckpoint(e.key, ledger.Tree{Origin: e.key.Name(), Size: 17, Root: root, Time: time.Now()})
		if err := e.st.SaveCheckpoint(t.Context(), store.Checkpoint{Size: 17, Root: root, Note: forged}); err != nil {
			t.Fatal(err)
		}
		if rep := verifyWith(next.Verifier); !hasProblem(rep, ledger.KindCheckpoint, "the latest stored checkpoint (checkpoint 5): bad checkpoint: signature does not verify with key "+next.Name()) {
			t.Errorf("an old-key checkpoint after the handover: problems %v", rep.Problems)
		}
		e.exec(t, `DELETE FROM ledger_checkpoints WHERE id = (SELECT max(id) FROM ledger_checkpoints)`)
		// A handover to a stranger's key that the log's key did not sign
		// hands nothing over: it and what the stranger signs after it fail.
		evil := newKey(t)
		fake, _ := ledger.SignCheckpoint(evil, ledger.Tree{Origin: e.key.Name(), Size: 17, Root: root,
			Rotation: &ledger.Rotation{From: next.VerifierKey, To: evil.VerifierKey}})
		after, _ := ledger.SignCheckpoint(evil, ledger.Tree{Origin: e.key.Name(), Size: 17, Root: root})
		for _, msg := range [][]byte{fake, after} {
			if err := e.st.SaveCheckpoint(t.Context(), store.Checkpoint{Size: 17, Root: root, Note: msg}); err != nil {
				t.Fatal(err)
			}
		}
		if rep := verifyWith(next.Verifier); !hasProblem(rep, ledger.KindCheckpoint, "checkpoint 5: ") || !hasProblem(rep, ledger.KindCheckpoint, "(checkpoint 6): ") {
			t.Errorf("a handover the log's key did not sign: problems %v", rep.Problems)
		}
		e.exec(t, `DELETE FROM ledger_checkpoints WHERE id > (SELECT min(id) + 3 FROM ledger_checkpoints)`)
		// The handover deleted: the checkpoints before it no longer check
		// with the new key.
		e.exec(t, `DELETE FROM ledger_checkpoints WHERE size = 13`)
		if rep := verifyWith(next.Verifier); !hasProblem(rep, ledger.KindCheckpoint, "checkpoint 1: ") {
			t.Errorf("the handover deleted: problems %v", rep.Problems)
		}
	})
}

// TestRetiredKeyHandsNothingOver: whoever stole the retired key (and can
// write the database) signs a "handover" from it to a key of their own,
// after the real one. It hands nothing over — the chain of handovers runs
// from the key each one handed to — so what the retired key or the thief's
// key signs after the real handover is reported, whichever key the
// verifier pinned. Before the fix any handover a trusted key signed
// counted, the retired key included, and the log verified.
func TestRetiredKeyHandsNothingOver(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		if err := ledger.PinKey(t.Context(), e.st, e.key); err != nil {
			t.Fatal(err)
		}
		e.ingest(t, 5)
		e.commit(t)
		next := newKey(t)
		if _, err := ledger.Rotate(t.Context(), e.st, e.key, next, ledger.RotateOptions{Origin: e.key.Name()}); err != nil {
			t.Fatal(err)
		}
		e.cpr = ledger.NewCheckpointer(e.st, ledger.CheckpointerOptions{Key: next, Origin: e.key.Name()})
		e.ingest(t, 3)
		e.commit(t) // checkpoint 3, signed by the new key

		// The thief: a checkpoint of the old key after the handover, then
		// a handover from the old key to their own, signed by both.
		root, _ := tlog.TreeHash(8, ledger.HashReader(t.Context(), e.st))
		thief := newKey(t)
		late, _ := ledger.SignCheckpoint(e.key, ledger.Tree{Origin: e.key.Name(), Size: 8, Root: root, Time: time.Now()})
		rogue, _ := ledger.SignCheckpoint(e.key, ledger.Tree{Origin: e.key.Name(), Size: 8, Root: root, Time: time.Now(),
			Rotation: &ledger.Rotation{From: e.key.VerifierKey, To: thief.VerifierKey}}, thief)
		after, _ := ledger.SignCheckpoint(thief, ledger.Tree{Origin: e.key.Name(), Size: 8, Root: root, Time: time.Now()})
		for _, msg := range [][]byte{late, rogue, after} {
			if err := e.st.SaveCheckpoint(t.Context(), store.Checkpoint{Size: 8, Root: root, Note: msg}); err != nil {
				t.Fatal(err)
			}
		}
		for name, v := range map[string]note.Verifier{"old": e.key.Verifier, "new": next.Verifier} {
			rep, err := ledger.Verify(t.Context(), e.st, ledger.VerifyOptions{Verifier: v, Origin: e.key.Name()})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"checkpoint 4: ", "checkpoint 5: ", "(checkpoint 6): "} {
				if !hasProblem(rep, ledger.KindCheckpoint, n) {
					t.Errorf("pinned the %s key: %s not reported; problems %v", name, strings.TrimSuffix(n, ": "), rep.Problems)
				}
			}
			if hasProblem(rep, ledger.KindCheckpoint, "checkpoint 3: ") || hasProblem(rep, ledger.KindCheckpoint, "checkpoint 2: ") {
				t.Errorf("pinned the %s key: the genuine checkpoints are reported: %v", name, rep.Problems)
			}
		}
	})
}

func newKey(t *testing.T) *ledger.Key {
	t.Helper()
	k, err := ledger.LoadOrCreateKey(filepath.Join(t.TempDir(), "log.key"), "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "log.key")
	k1, err := ledger.LoadOrCreateKey(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, %v", fi, err)
	}
	if !strings.HasPrefix(k1.Name(), "anyhook-log-") {
		t.Errorf("generated name %q", k1.Name())
	}
	k2, err := ledger.LoadOrCreateKey(path, "other")
	if err != nil || k2.VerifierKey != k1.VerifierKey {
		t.Fatalf("reloaded key %v, %v; want the same key", k2, err)
	}
	if _, err := note.NewVerifier(k1.VerifierKey); err != nil {
		t.Errorf("VerifierKey %q: %v", k1.VerifierKey, err)
	}
	os.WriteFile(path, []byte("garbage\n"), 0o600)
	if _, err := ledger.LoadKey(path); err == nil {
		t.Error("garbage key loaded")
	}
}

// Gateways started at once on one config directory race to create the key:
// each must load the one key that won, never a half-written file.
func TestKeyFileConcurrentCreate(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "log.key")
		keys := make([]*ledger.Key, 8)
		errs := make([]error, len(keys))
		var wg sync.WaitGroup
		for i := range keys {
			wg.Go(func() { keys[i], errs[i] = ledger.LoadOrCreateKey(path, "") })
		}
		wg.Wait()
		for i := range keys {
			if errs[i] != nil {
				t.Fatalf("round %d, starter %d: %v", round, i, errs[i])
			}
			if keys[i].VerifierKey != keys[0].VerifierKey {
				t.Fatalf("round %d: starters got different keys %q and %q", round, keys[0].VerifierKey, keys[i].VerifierKey)
			}
		}
		if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
			t.Fatalf("round %d: %d files left, want only the key", round, len(ents))
		}
	}
}

// TestLeafEncoding pins the documented encoding (docs/ledger.md) with an
// independent implementation and a golden value.
func TestLeafEncoding(t *testing.T) {
	t.Parallel()
	ev := anyhook.Event{
		ID: "0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", Source: "stripe", DedupKey: "evt_123",
		ReceivedAt: time.UnixMicro(1764504000123456),
		Header:     http.Header{"Stripe-Signature": {"t=1,v1=ab"}, "Content-Type": {"application/json"}, "X-Multi": {"2", "1"}},
		Body:       []byte(`{"id":"evt_123"}`),
	}
	str := func(s string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...) }
	var hdr []byte
	for _, kv := range [][2]string{{"Content-Type", "application/json"}, {"Stripe-Signature", "t=1,v1=ab"}, {"X-Multi", "2"}, {"X-Multi", "1"}} {
		hdr = append(append(hdr, str(kv[0])...), str(kv[1])...)
	}
	hh, bh := sha256.Sum256(hdr), sha256.Sum256(ev.Body)
	rec := []byte("AnyHook leaf v1\n")
	rec = append(rec, str(ev.ID)...)
	rec = append(rec, str("stripe")...)
	rec = append(rec, str("evt_123")...)
	rec = binary.BigEndian.AppendUint64(rec, 1764504000123456)
	rec = append(append(rec, hh[:]...), bh[:]...)
	want := sha256.Sum256(append([]byte{0}, rec...))

	leaf := ledger.LeafOf(&ev)
	if leaf.Hash != want || leaf.HeaderHash != hh || leaf.BodyHash != bh {
		t.Fatalf("leaf %x, want %x", leaf.Hash, want)
	}
	const golden = "17edd0ef53fce72b26bc909cdb09a7c7213746fc7f7b5ca805b789b4b0b692b8"
	if got := hex.EncodeToString(leaf.Hash[:]); got != golden {
		t.Logf("leaf hash = %s (update the golden value and docs/ledger.md if the encoding changed on purpose)", got)
		t.Fail()
	}
}

func b64(h [32]byte) string { return base64.StdEncoding.EncodeToString(h[:]) }

// TestLeafEncodingV2 pins the v2 record (an event that did not arrive as a
// webhook: its origin is on the leaf) with an independent implementation,
// and checks that a webhook's leaf is still the v1 leaf: old entries keep
// verifying.
func TestLeafEncodingV2(t *testing.T) {
	t.Parallel()
	ev := anyhook.Event{
		ID: "0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", Source: "stripe", DedupKey: "evt_123",
		ReceivedAt: time.UnixMicro(1764504000123456),
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       []byte(`{"id":"evt_123"}`),
	}
	v1 := ledger.LeafOf(&ev)
	ev.Origin = anyhook.OriginWebhook
	if got := ledger.LeafOf(&ev); got != v1 {
		t.Fatalf("origin webhook changed the leaf: %x, want the v1 leaf %x", got.Hash, v1.Hash)
	}
	ev.Origin = anyhook.OriginBackfill
	str := func(s string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...) }
	hh, bh := sha256.Sum256(append(str("Content-Type"), str("application/json")...)), sha256.Sum256(ev.Body)
	rec := []byte("AnyHook leaf v2\n")
	rec = append(rec, str("backfill")...)
	rec = append(rec, str(ev.ID)...)
	rec = append(rec, str("stripe")...)
	rec = append(rec, str("evt_123")...)
	rec = binary.BigEndian.AppendUint64(rec, 1764504000123456)
	rec = append(append(rec, hh[:]...), bh[:]...)
	want := sha256.Sum256(append([]byte{0}, rec...))
	if got := ledger.LeafOf(&ev); got.Hash != want || got.Hash == v1.Hash {
		t.Fatalf("backfill leaf %x, want %x (and not the v1 leaf)", got.Hash, want)
	}
}

// TestOriginsVerify logs webhook events (v1 leaves, as every entry written
// before origins existed) and backfilled ones (v2) in one log: it
// verifies; changing an origin in the database, either way, is caught.
func TestOriginsVerify(t *testing.T) {
	t.Parallel()
	forEachEnv(t, func(t *testing.T, e *env) {
		old := e.ingest(t, 3)
		var evs []store.NewEvent
		for i := range 3 {
			id := store.NewID()
			evs = append(evs, store.NewEvent{Event: anyhook.Event{
				ID: id, Source: "stripe", DedupKey: "evt_bf" + id, ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/stripe",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: fmt.Appendf(nil, `{"id":"evt_bf%s","n":%d}`, id, i),
				Origin: anyhook.OriginBackfill, Verification: anyhook.Verification{Method: anyhook.VerifyFetched, Scheme: "fetched from the provider API", Secret: -1},
			}})
		}
		res, err := e.st.Ingest(t.Context(), evs)
		if err != nil {
			t.Fatal(err)
		}
		e.commit(t)
		if rep := e.verify(t, nil); !rep.OK() || rep.Entries != 6 {
			t.Fatalf("report %+v, problems %v", rep, rep.Problems)
		}
		// The old (v1) leaf of a webhook event is what the log holds.
		recs, err := e.st.LedgerRecords(t.Context(), 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Event.ID != old[0] {
				continue
			}
			l := r.Event
			rec := ledger.Record(l.ID, l.Source, l.DedupKey, l.ReceivedAt.UnixMicro(), sha256.Sum256(ledger.CanonicalHeaders(l.Header)), sha256.Sum256(l.Body))
			if tlog.RecordHash(rec) != tlog.Hash(r.Entry.LeafHash) {
				t.Fatalf("a webhook event's logged leaf is not its v1 record's hash")
			}
		}
		e.exec(t, `UPDATE events SET origin = 'backfill' WHERE id = ?`, old[1])
		e.exec(t, `UPDATE events SET origin = NULL WHERE id = ?`, res[2].ID)
		wantOnly(t, e.verify(t, nil), ledger.KindFieldsChanged, old[1], res[2].ID)
	})
}

// TestPushRedirectIsAFailure: a push_url that redirects is a failed
// push, not a pushed checkpoint. net/http would re-send a 301/302/303 as
// a GET (whose 200 counted the checkpoint as pushed though it never
// arrived), and follow a 307 to another origin with the checkpoint and a
// Referer naming push_url (whose query may hold the witness's token). A
// 307/308 within push_url's origin keeps the POST and is followed.
func TestPushRedirectIsAFailure(t *testing.T) {
	t.Parallel()
	other := redirecttest.NewElsewhere(t)
	t.Cleanup(func() {
		if got := other.Requests(); len(got) != 0 {
			t.Errorf("another origin was sent %d requests: %q", len(got), got)
		}
	})
	for _, code := range redirecttest.Codes {
		for _, to := range []*redirecttest.Elsewhere{other, nil} {
			t.Run(fmt.Sprintf("%d elsewhere=%v", code, to != nil), func(t *testing.T) {
				t.Parallel()
				witness, pushed := redirecttest.Server(t, code, to)
				e := setup(t, backends[0])
				var logged strings.Builder
				e.cpr = ledger.NewCheckpointer(e.st, ledger.CheckpointerOptions{Key: e.key,
					PushURL: witness.URL + "/push?token=WITNESS-TOKEN", Logger: slog.New(slog.NewTextHandler(&logged, nil))})
				e.ingest(t, 3)
				e.commit(t)
				failed := strings.Contains(logged.String(), "pushing the checkpoint failed")
				switch follow := redirecttest.Followed(code, to != nil); {
				case follow && (pushed.Load() != 1 || failed):
					t.Errorf("%d pushes arrived; logs:\n%s", pushed.Load(), &logged)
				case !follow && !failed:
					t.Errorf("not logged as failed; logs:\n%s", &logged)
				case strings.Contains(logged.String(), "WITNESS-TOKEN"):
					t.Errorf("logs leak push_url:\n%s", &logged)
				}
			})
		}
	}
}

// TestForeignCheckpointNamed: a checkpoint that no key of the log's
// signed (another gateway's, given by mistake, or this log and its key
// replaced) is a problem that names both signers.
func TestForeignCheckpointNamed(t *testing.T) {
	t.Parallel()
	e := setup(t, backends[0])
	e.ingest(t, 3)
	e.commit(t)
	other := setup(t, backends[0])
	other.ingest(t, 3)
	theirs := other.commit(t)
	rep := e.verify(t, theirs.Note)
	want := fmt.Sprintf("it is signed by %s+%08x, and this log by %s+%08x: a checkpoint of another log",
		other.key.Name(), other.key.Verifier.KeyHash(), e.key.Name(), e.key.Verifier.KeyHash())
	if rep.OK() || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].String(), want) ||
		strings.Count(rep.Problems[0].String(), "bad checkpoint") != 1 {
		t.Fatalf("problems %v; want one naming %q", rep.Problems, want)
	}
}
