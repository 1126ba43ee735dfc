package sqlstore

import (
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// The backfills table (store.BackfillLog), the same in both dialects.
const backfillColumns = `source, run, from_at, to_at, dry_run, started_by, state, progress, error, started_at, finished_at, heard_at`

// StartBackfill returns the statement that makes b its source's latest
// backfill unless the latest is running and was heard from at or after
// alive, and its arguments. It returns b's run when it did, no row when
// it did not (LatestBackfill then reads the running one).
func StartBackfill(d Dialect, b store.Backfill, alive time.Time) (string, []any) {
	q := `INSERT INTO backfills (` + backfillColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (source) DO UPDATE SET run = excluded.run, from_at = excluded.from_at, to_at = excluded.to_at,
			dry_run = excluded.dry_run, started_by = excluded.started_by, state = excluded.state, progress = excluded.progress,
			error = excluded.error, started_at = excluded.started_at, finished_at = excluded.finished_at, heard_at = excluded.heard_at
		WHERE backfills.state <> 'running' OR backfills.heard_at < ?
		RETURNING run`
	args := []any{b.Source, b.Run, d.Time(b.From), nullTime(d, b.To), b.DryRun, b.By, b.State, string(b.Progress), b.Error,
		d.Time(b.StartedAt), nullTime(d, b.FinishedAt), d.Time(b.HeardAt), d.Time(alive)}
	return d.Rebind(q), args
}

// SaveBackfill returns the statement that writes b over its source's
// latest backfill if that is b's run, and its arguments.
func SaveBackfill(d Dialect, b store.Backfill) (string, []any) {
	q := `UPDATE backfills SET state = ?, progress = ?, error = ?, finished_at = ?, heard_at = ? WHERE source = ? AND run = ?`
	return d.Rebind(q), []any{b.State, string(b.Progress), b.Error, nullTime(d, b.FinishedAt), d.Time(b.HeardAt), b.Source, b.Run}
}

// LatestBackfill returns the query that reads source's latest backfill
// (ScanBackfill reads its row), and its arguments.
func LatestBackfill(d Dialect, source string) (string, []any) {
	return d.Rebind(`SELECT ` + backfillColumns + ` FROM backfills WHERE source = ?`), []any{source}
}

// ScanBackfill scans a row of LatestBackfill.
func ScanBackfill(sc Scanner) (store.Backfill, error) {
	var b store.Backfill
	var progress string
	err := sc.Scan(&b.Source, &b.Run, Time(&b.From), Time(&b.To), &b.DryRun, &b.By, &b.State, &progress, &b.Error,
		Time(&b.StartedAt), Time(&b.FinishedAt), Time(&b.HeardAt))
	b.Progress = []byte(progress)
	return b, err
}

// nullTime is t as a parameter of a nullable time column: NULL when zero.
func nullTime(d Dialect, t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return d.Time(t)
}
