package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// A copy into tables of millions of rows spends most of its time in their
// secondary indexes: each row copied is a lookup and an insert in every one
// of them, and once the indexes outgrow the cache most of those are reads
// from disk (a copy into a 7M-event SQLite store ran at 1,400–2,000
// events/s). So the copy drops the indexes it does not read by, and builds
// them again once it is done, by sorting, which is many times faster. The
// definitions dropped are kept in a table of the store until they are built
// again, so a copy that stopped midway is finished by the next one (or by
// --written 0). Indexes that back a constraint (primary keys, unique
// constraints) stay: the copy relies on them to refuse a second copy.

const droppedTable = "bench_dropped_indexes"

// dropIndexes drops the secondary indexes of the copy's tables whose first
// column is not one the copy looks rows up by (event_id, delivery_id),
// recording each definition first.
func dropIndexes(ctx context.Context, db *sql.DB, d copyDialect, say func(string, ...any)) error {
	tables := make([]string, len(copyRefs))
	for i, t := range copyRefs {
		tables[i] = "'" + t.table + "'"
	}
	in := strings.Join(tables, ", ")
	q := `SELECT m.name, m.sql FROM sqlite_master m WHERE m.type = 'index' AND m.sql IS NOT NULL AND m.tbl_name IN (` + in + `)
		AND (SELECT name FROM pragma_index_info(m.name) WHERE seqno = 0) NOT IN ('event_id', 'delivery_id')`
	if d.postgres {
		q = `SELECT i.relname, pg_get_indexdef(x.indexrelid) FROM pg_index x
			JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
			LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
			WHERE t.relnamespace = current_schema()::regnamespace AND t.relname IN (` + in + `)
				AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
				AND coalesce(a.attname, '') NOT IN ('event_id', 'delivery_id')`
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+droppedTable+` (name TEXT PRIMARY KEY, def TEXT NOT NULL)`); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	type index struct{ name, def string }
	var drop []index
	for rows.Next() {
		var i index
		if err := rows.Scan(&i.name, &i.def); err != nil {
			rows.Close()
			return err
		}
		drop = append(drop, i)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, i := range drop {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+droppedTable+` (name, def) VALUES (`+d.ph(1)+`, `+d.ph(2)+`)`, i.name, i.def); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DROP INDEX `+i.name); err != nil {
			return fmt.Errorf("drop index %s: %w", i.name, err)
		}
	}
	if len(drop) > 0 {
		say("dropped %d indexes for the copy; they are built again after it", len(drop))
	}
	return tx.Commit()
}

// restoreIndexes builds again the indexes an earlier dropIndexes dropped.
func restoreIndexes(ctx context.Context, db *sql.DB, d copyDialect, say func(string, ...any)) error {
	var exists int
	q := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '` + droppedTable + `'`
	if d.postgres {
		q = `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = '` + droppedTable + `'`
	}
	if err := db.QueryRowContext(ctx, q).Scan(&exists); err != nil || exists == 0 {
		return err
	}
	rows, err := db.QueryContext(ctx, `SELECT name, def FROM `+droppedTable+` ORDER BY name`)
	if err != nil {
		return err
	}
	var names, defs []string
	for rows.Next() {
		var n, def string
		if err := rows.Scan(&n, &def); err != nil {
			rows.Close()
			return err
		}
		names, defs = append(names, n), append(defs, def)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if d.postgres {
		// An index build sorts in maintenance_work_mem; the default 64 MB
		// spills ten million keys to disk in many runs.
		if _, err := db.ExecContext(ctx, `SET maintenance_work_mem = '1GB'`); err != nil {
			return err
		}
	}
	for i, def := range defs {
		t0 := time.Now()
		if _, err := db.ExecContext(ctx, def); err != nil {
			return fmt.Errorf("build index %s again: %w", names[i], err)
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM `+droppedTable+` WHERE name = `+d.ph(1), names[i]); err != nil {
			return err
		}
		say("built index %s in %s", names[i], time.Since(t0).Round(100*time.Millisecond))
	}
	_, err = db.ExecContext(ctx, `DROP TABLE `+droppedTable)
	return err
}
