package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// A copy fill: ten million events through the store's write path take
// hours (SQLite 1,640 events/s, PostgreSQL 440/s on the 2-core machine of
// BENCHMARKS.md), so past --written the fill copies the events this run
// wrote, with everything that hangs off them, in SQL. A copy keeps its
// original's times, source, type, body, object history and outcomes, and
// gets an id of its own that sorts among its original's neighbours (the
// same UUIDv7 time prefix), a dedup key and an object of its own (suffix
// "~k"), so the store holds k+1 times the objects and the same spread.
// The tables' own triggers keep the counters as they keep them for any
// insert; the one transition an insert does not replay, a delivery going
// delivered or dead, is added to the per-minute activity as the update
// trigger would have. The log is not copied: the gateway sequences the
// copies when it first starts on the store, as it would events written by
// any other process.

// copyRefs are, per table the copy writes, the columns that refer to an
// event or a delivery by id and so get the copy's id; every other column
// is copied as it is (read from the database, so a column added later is
// copied too).
var copyRefs = []struct {
	table string
	ids   []string
}{
	{"events", []string{"id"}},
	{"deliveries", []string{"id", "event_id"}},
	{"attempts", []string{"delivery_id"}},
	{"actions", []string{"id", "event_id", "delivery_id"}},
	{"arrivals", []string{"event_id"}},
}

// copyDialect is what differs between the stores' SQL.
type copyDialect struct {
	postgres bool
}

func (d copyDialect) ph(i int) string {
	if d.postgres {
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

// in is the condition that col is one of the ids bound to the first
// placeholder (as idList gives them): a chunk's originals are named, not
// found by a range of ids, which after k copies holds k+1 times the rows.
// PostgreSQL gets an array, whose length its planner sees: from a set
// returning function it guessed half of the deliveries would match and
// scanned them all.
func (d copyDialect) in(col string) string {
	if d.postgres {
		return col + " = ANY(CAST($1 AS text[]))"
	}
	return col + " IN (SELECT value FROM json_each(?))"
}

// idList is ids as the value in's placeholder takes: a JSON array for
// SQLite, an array literal for PostgreSQL (the ids are UUIDs: nothing to
// quote).
func (d copyDialect) idList(ids []string) (string, error) {
	if d.postgres {
		return "{" + strings.Join(ids, ",") + "}", nil
	}
	b, err := json.Marshal(ids)
	return string(b), err
}

func (d copyDialect) columns(ctx context.Context, db *sql.DB, table string) ([]string, error) {
	q := `SELECT name FROM pragma_table_info(?) ORDER BY cid`
	if d.postgres {
		q = `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`
	}
	rows, err := db.QueryContext(ctx, q, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %s not found", table)
	}
	return cols, nil
}

// copyID is the k-th copy's id of an id: the UUID's version digit 8
// instead of 7 (so no copy is an original) and its random tail's first two
// hex digits the copy's number (so no copy is another's), after the same
// 48-bit time: it sorts by time among its original's neighbours.
func copyID(col string, k int) string {
	return fmt.Sprintf("substr(%[1]s, 1, 14) || '8' || substr(%[1]s, 16, 9) || '%02[2]x' || substr(%[1]s, 27)", col, k)
}

// copyIDOf is copyID computed here.
func copyIDOf(id string, k int) string {
	return id[:14] + "8" + id[15:24] + fmt.Sprintf("%02x", k) + id[26:]
}

// openCopyDB opens the store's database with database/sql.
func openCopyDB(dsn string) (*sql.DB, copyDialect, error) {
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		q := url.Values{}
		// A large page cache: the copies go into every index of tables of
		// millions of rows, and each page missed is a read system call.
		for _, p := range []string{"journal_mode(WAL)", "synchronous(NORMAL)", "busy_timeout(10000)", "foreign_keys(1)", "cache_size(-2000000)"} {
			q.Add("_pragma", p)
		}
		db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
		if err != nil {
			return nil, copyDialect{}, err
		}
		db.SetMaxOpenConns(1)
		return db, copyDialect{}, nil
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, copyDialect{}, err
	}
	// The copy reads its originals' rows by index, ten thousand at a time.
	// Against a table of a million rows the planner prefers to read the
	// whole table (318 ms against 145 ms for one chunk's attempts), a cost
	// that grows with every chunk copied; an index probe does not.
	cfg.RuntimeParams["enable_seqscan"] = "off"
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(1)
	return db, copyDialect{postgres: true}, nil
}

// copyFill adds n events to the store as copies of the events of run
// (their dedup keys start with "evt_<run>_"; "" is the latest run's), in
// chunks of chunk events per transaction. A chunk copied by an earlier
// call that stopped midway is skipped (and counted): so a copy can be
// resumed.
func copyFill(ctx context.Context, dsn, run string, n, chunk int, say func(string, ...any)) error {
	db, d, err := openCopyDB(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if run == "" {
		var key string
		if err := db.QueryRowContext(ctx, `SELECT dedup_key FROM events WHERE dedup_key || '' LIKE 'evt\_%' ESCAPE '\' ORDER BY id DESC LIMIT 1`).Scan(&key); err != nil {
			return fmt.Errorf("no filled events to copy: %w", err)
		}
		// (|| '': the newest events back to the first filled one, not
		// every filled one through an index on the key, then sorted.)
		run, _, _ = strings.Cut(strings.TrimPrefix(key, "evt_"), "_")
		say("copying the events of fill run %s", run)
	}
	// The originals, by id: the events this run wrote (not a duplicate's
	// key, not a copy's).
	var base []string
	// events_dedup (source, dedup_key): the key's range in each source.
	rows, err := db.QueryContext(ctx, `SELECT id FROM events WHERE source IN ('`+strings.Join(fillSources, `', '`)+`')
		AND dedup_key >= `+d.ph(1)+` AND dedup_key < `+d.ph(2)+` AND dedup_key NOT LIKE '%~%' ORDER BY id`, "evt_"+run+"_", "evt_"+run+"`")
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		base = append(base, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(base) == 0 {
		return fmt.Errorf("no events of this run to copy")
	}
	if need := (n + len(base) - 1) / len(base); need > 255 {
		return fmt.Errorf("%d copies of %d events needed; at most 255: write more events first (--written)", need, len(base))
	}
	cols := map[string][]string{}
	for _, t := range copyRefs {
		if cols[t.table], err = d.columns(ctx, db, t.table); err != nil {
			return err
		}
	}
	if err := dropIndexes(ctx, db, d, say); err != nil {
		return fmt.Errorf("drop indexes: %w", err)
	}
	if d.postgres {
		// Statistics of the events just written, not of an empty store:
		// without them a chunk's ten thousand ids look like the whole table.
		if _, err := db.ExecContext(ctx, `ANALYZE events, deliveries, attempts, actions, arrivals`); err != nil {
			return err
		}
	}
	t0, lastSay, done := time.Now(), time.Now(), 0
	for k := 1; done < n; k++ {
		var inserts []string
		for _, t := range copyRefs {
			q, err := copyInsert(d, t.table, cols[t.table], t.ids, k)
			if err != nil {
				return err
			}
			inserts = append(inserts, q)
		}
		if err := copyVersions(ctx, db, k); err != nil {
			return err
		}
		for i := 0; i < len(base) && done < n; i += chunk {
			m := min(chunk, len(base)-i, n-done)
			// A chunk an earlier call copied (all of it, or its first
			// events where that call's n ran out) is skipped.
			exists := func(j int) (bool, error) {
				var n int
				err := db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE id = `+d.ph(1), copyIDOf(base[j], k)).Scan(&n)
				return n > 0, err
			}
			first, end := i, i+m // the copies made are a prefix of the chunk
			for first < end {
				mid := (first + end) / 2
				ok, err := exists(mid)
				if err != nil {
					return err
				}
				if ok {
					first = mid + 1
				} else {
					end = mid
				}
			}
			done += first - i
			if first == i+m {
				continue
			}
			m -= first - i
			ids, err := d.idList(base[first : first+m])
			if err != nil {
				return err
			}
			if err := copyChunk(ctx, db, d, inserts, ids); err != nil {
				return fmt.Errorf("copy %d of events %s..%s: %w", k, base[first], base[first+m-1], err)
			}
			done += m
			if time.Since(lastSay) > 10*time.Second {
				lastSay = time.Now()
				say("copied %d of %d events (%.0f/s)", done, n, float64(done)/time.Since(t0).Seconds())
			}
		}
	}
	say("copied %d events in %s (%.0f/s)", done, time.Since(t0).Round(time.Second), float64(done)/time.Since(t0).Seconds())
	t0 = time.Now()
	if err := restoreIndexes(ctx, db, d, say); err != nil {
		return err
	}
	say("built the indexes again in %s", time.Since(t0).Round(time.Second))
	return nil
}

// copyInsert is the INSERT … SELECT that copies the rows of table hanging
// off the events with the ids given as a JSON array (placeholder 1) as their k-th
// copies.
func copyInsert(d copyDialect, table string, cols, ids []string, k int) (string, error) {
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = c
		for _, id := range ids {
			if c == id {
				sel[i] = copyID(c, k)
			}
		}
		switch {
		case table == "events" && c == "dedup_key", table == "events" && c == "content_key", table == "events" && c == "object":
			sel[i] = fmt.Sprintf("CASE WHEN %[1]s IS NULL THEN NULL ELSE %[1]s || '~%[2]d' END", c, k)
		}
	}
	var where string
	switch table {
	case "events":
		where = d.in("id")
	case "deliveries", "actions", "arrivals":
		where = d.in("event_id")
	case "attempts":
		where = "delivery_id IN (SELECT id FROM deliveries WHERE " + d.in("event_id") + ")"
	default:
		return "", fmt.Errorf("no copy rule for %s", table)
	}
	return fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s",
		table, strings.Join(cols, ", "), strings.Join(sel, ", "), table, where), nil
}

// copyChunk copies the events with the ids given as a JSON array and what hangs off them in one
// transaction, and adds the copies' delivered and dead transitions to the
// per-minute activity.
func copyChunk(ctx context.Context, db *sql.DB, d copyDialect, inserts []string, ids string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i, q := range inserts {
		if _, err := tx.ExecContext(ctx, q, ids); err != nil {
			return fmt.Errorf("%s: %w", copyRefs[i].table, err)
		}
	}
	// A copy's deliveries went delivered or dead when their originals
	// did: count the originals'.
	minute, shardCol, shardVal, conflict := "updated_at / 60000000", "", "", "(minute, destination, kind)"
	if d.postgres {
		minute, shardCol, shardVal, conflict = "anyhook_minute(updated_at)", ", shard", ", 0", "(minute, destination, kind, shard)"
	}
	q := fmt.Sprintf(`INSERT INTO activity (minute, destination, kind%[1]s, n)
		SELECT %[2]s, destination, status%[3]s, count(*) FROM deliveries
		WHERE %[4]s
			AND status IN ('delivered', 'dead') AND resolution <> 'marked_delivered'
		GROUP BY 1, 2, 3
		ON CONFLICT %[5]s DO UPDATE SET n = activity.n + excluded.n`,
		shardCol, minute, shardVal, d.in("event_id"), conflict)
	if _, err := tx.ExecContext(ctx, q, ids); err != nil {
		return fmt.Errorf("activity: %w", err)
	}
	return tx.Commit()
}

// copyVersions gives the k-th copies' objects their newest versions, as
// the originals' objects have them.
func copyVersions(ctx context.Context, db *sql.DB, k int) error {
	_, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO versions (source, object, version)
		SELECT source, object || '~%d', version FROM versions WHERE object NOT LIKE '%%~%%'
		ON CONFLICT DO NOTHING`, k))
	return err
}
