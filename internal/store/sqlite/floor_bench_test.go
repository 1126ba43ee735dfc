package sqlite_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// BenchmarkDurableFloor measures what SQLite itself costs an event, below
// every layer of the gateway: how far could the gateway's CPU per event
// fall while each event stays durable before its 2xx? Every
// sub-benchmark commits batches of 1, 14 (what ingest's group commit forms
// under anyhook bench's load of 32 connections) or 64 events with
// synchronous=FULL in WAL mode, on one goroutine, 1 KiB bodies:
//
//   - floor=event: the least a durable, deduplicated event needs, in the
//     same driver: one row (id, source, dedup key, time, headers, body)
//     under a unique (source, dedup key) index, one commit per batch;
//   - floor=lifecycle: that, plus a delivery row in the same transaction
//     and a second transaction per batch that marks the deliveries done
//     and inserts their attempts: the fewest writes that record an event,
//     its delivery and its outcome;
//   - store: the real store doing the same (Ingest with claims at ingest,
//     then Finish), with its whole schema and its indexes, no log;
//   - floor=journal: no database at all, what a journal of our own would
//     cost at least (the alternative BENCHMARKS.md weighs, stop 25): each
//     batch's events appended to one file as length- and CRC-framed
//     records in one write and made durable with one fdatasync, their
//     dedup keys in an in-memory map (which such a journal would rebuild
//     at start), then the batch's outcomes appended unsynced (as Finish
//     commits them).
//
// Each reports events/s and CPU µs/event (this process's getrusage, user
// and system; the fsync's wait is not CPU). Compare with anyhook bench's
// "gateway CPU per event" (BENCHMARKS.md):
//
//	go test ./internal/store/sqlite -run '^$' -bench DurableFloor -benchtime 20000x
func BenchmarkDurableFloor(b *testing.B) {
	for _, n := range []int{1, 14, 64} {
		b.Run(fmt.Sprintf("batch=%d/floor=event", n), func(b *testing.B) { benchFloor(b, n, false) })
		b.Run(fmt.Sprintf("batch=%d/floor=lifecycle", n), func(b *testing.B) { benchFloor(b, n, true) })
		b.Run(fmt.Sprintf("batch=%d/store", n), func(b *testing.B) { benchStoreFloor(b, n) })
		b.Run(fmt.Sprintf("batch=%d/floor=journal", n), func(b *testing.B) { benchJournalFloor(b, n) })
	}
}

// openFloorDB opens a new database in WAL mode with the given
// synchronous level and the floor's schema: events under a unique
// (source, dedup key) index, deliveries with their due index, attempts.
// It is closed when b ends.
func openFloorDB(b *testing.B, sync string) *sql.DB {
	path := filepath.Join(b.TempDir(), "floor.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE TABLE events (id TEXT PRIMARY KEY, source TEXT NOT NULL, dedup_key TEXT, received_at INTEGER NOT NULL, headers BLOB NOT NULL, body BLOB NOT NULL)`,
		`CREATE UNIQUE INDEX events_dedup ON events (source, dedup_key)`,
		`CREATE TABLE deliveries (id TEXT PRIMARY KEY, event_id TEXT NOT NULL, destination TEXT NOT NULL, status TEXT NOT NULL, next_attempt_at INTEGER NOT NULL)`,
		`CREATE INDEX deliveries_due ON deliveries (destination, next_attempt_at) WHERE status = 'pending'`,
		`CREATE TABLE attempts (delivery_id TEXT NOT NULL, number INTEGER NOT NULL, status_code INTEGER NOT NULL, PRIMARY KEY (delivery_id, number))`,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

var floorHeaders = []byte("Content-Type: application/json\r\nUser-Agent: bench/1\r\nX-Request-Id: 0123456789abcdef\r\n")

func floorBody() []byte {
	body := make([]byte, 1024)
	rand.Read(body)
	return body
}

func benchFloor(b *testing.B, batch int, lifecycle bool) {
	db := openFloorDB(b, "FULL")
	ctx := b.Context()
	ids := make([]string, batch)
	body := floorBody()
	run := func(n int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for i := range n {
			ids[i] = store.NewID()
			if _, err := tx.Exec(`INSERT INTO events VALUES (?, 'generic', ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
				ids[i], rand.Text(), time.Now().UnixMicro(), floorHeaders, body); err != nil {
				return err
			}
			if lifecycle {
				if _, err := tx.Exec(`INSERT INTO deliveries VALUES (?, ?, 'sink', 'delivering', 0)`, ids[i], ids[i]); err != nil {
					return err
				}
			}
		}
		if err := tx.Commit(); err != nil || !lifecycle {
			return err
		}
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, id := range ids[:n] {
			if _, err := tx.Exec(`UPDATE deliveries SET status = 'delivered' WHERE id = ?`, id); err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO attempts VALUES (?, 1, 200)`, id); err != nil {
				return err
			}
		}
		return tx.Commit()
	}
	measureFloor(b, batch, run)
}

func benchStoreFloor(b *testing.B, batch int) {
	st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := b.Context()
	body := floorBody()
	header, err := store.DecodeHeader(floorHeaders)
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]store.NewEvent, batch)
	outs := make([]store.Outcome, 0, batch)
	run := func(n int) error {
		for i := range n {
			evs[i] = store.NewEvent{
				Event:        anyhook.Event{ID: store.NewID(), Source: "generic", DedupKey: rand.Text(), ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/generic", Header: header, Body: body},
				Destinations: []string{"sink"},
				Lease:        []time.Duration{time.Minute},
			}
		}
		res, err := st.Ingest(ctx, evs[:n])
		if err != nil {
			return err
		}
		outs = outs[:0]
		for _, r := range res {
			if r.Err != nil || len(r.Claims) != 1 {
				return fmt.Errorf("ingest: %v, %d claims", r.Err, len(r.Claims))
			}
			d := r.Claims[0].Delivery
			outs = append(outs, store.Outcome{DeliveryID: d.ID, Attempt: d.AttemptCount, Status: anyhook.StatusDelivered,
				Result: anyhook.Attempt{Number: d.AttemptCount, StartedAt: time.Now(), StatusCode: 200}})
		}
		lost, err := st.Finish(ctx, outs)
		if err == nil && len(lost) > 0 {
			err = fmt.Errorf("finish lost %d outcomes", len(lost))
		}
		return err
	}
	measureFloor(b, batch, run)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func benchJournalFloor(b *testing.B, batch int) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "journal"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	body := floorBody()
	seen := map[string]bool{} // "source\x00dedup key"
	var buf []byte
	// record appends one framed record of fields to buf: its length, its
	// CRC-32C, then each field with its length.
	record := func(fields ...[]byte) {
		start := len(buf)
		buf = append(buf, make([]byte, 8)...)
		for _, fl := range fields {
			buf = binary.AppendUvarint(buf, uint64(len(fl)))
			buf = append(buf, fl...)
		}
		binary.LittleEndian.PutUint32(buf[start:], uint32(len(buf)-start-8))
		binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+8:], castagnoli))
	}
	ids := make([]string, batch)
	run := func(n int) error {
		buf = buf[:0]
		for i := range n {
			ids[i] = store.NewID()
			key := rand.Text()
			if seen["generic\x00"+key] {
				continue
			}
			seen["generic\x00"+key] = true
			record([]byte(ids[i]), []byte("generic"), []byte(key), binary.AppendVarint(nil, time.Now().UnixMicro()), floorHeaders, body)
		}
		if _, err := f.Write(buf); err != nil {
			return err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
		buf = buf[:0]
		for _, id := range ids[:n] {
			record([]byte(id), []byte("delivered"), binary.AppendVarint(nil, 200))
		}
		_, err := f.Write(buf)
		return err
	}
	measureFloor(b, batch, run)
}

// measureFloor runs b.N events through run in batches of batch events and
// reports events/s, CPU µs per event and the 50th and 99th percentiles of
// a batch's time (what its events' requests would wait for the commits).
func measureFloor(b *testing.B, batch int, run func(n int) error) {
	if err := measureFloorErr(b, batch, run); err != nil {
		b.Fatal(err)
	}
}

// measureFloorErr is measureFloor returning run's first error rather than
// failing b, for a caller that must clean up first.
func measureFloorErr(b *testing.B, batch int, run func(n int) error) error {
	took := make([]time.Duration, 0, b.N/batch+1)
	cpu0 := cpuTime()
	start := time.Now()
	b.ResetTimer()
	for left := b.N; left > 0; left -= batch {
		t := time.Now()
		if err := run(min(left, batch)); err != nil {
			return err
		}
		took = append(took, time.Since(t))
	}
	b.StopTimer()
	wall, cpu := time.Since(start), cpuTime()-cpu0
	b.ReportMetric(float64(b.N)/wall.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/event")
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "batch-p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "batch-p99-ms")
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
