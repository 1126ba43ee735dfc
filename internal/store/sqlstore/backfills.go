package sqlstore

import (
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// The backfills table (store.BackfillLog). Its times of liveness
// (heard_at, and the staleness judged against it) are the database's
// clock: PostgreSQL's now(); for SQLite, one file on one host, the
// store's clock, passed as now.
const backfillColumns = `source, run, from_at, to_at, dry_run, started_by, state, progress, error, started_at, finished_at, heard_at`

// heardNow is the SQL of "now" for heard_at, and its argument if any.
func heardNow(d Dialect, now time.Time) (string, []any) {
	if d.Numbered {
		return "now()", nil
	}
	return "?", []any{d.Time(now)}
}

// staleSince is the SQL of "heard_at before staleAfter ago", and its
// arguments.
func staleSince(d Dialect, now time.Time, staleAfter time.Duration) (string, []any) {
	if d.Numbered {
		return "heard_at < now() - ? * interval '1 microsecond'", []any{staleAfter.Microseconds()}
	}
	return "heard_at < ?", []any{d.Time(now.Add(-staleAfter))}
}

// StartBackfill returns the statement that makes b its source's latest
// backfill, heard from now, unless the latest is running and was heard
// from within staleAfter, and its arguments. It returns b's heard_at
// when it did, no row when it did not (LatestBackfill then reads the
// running one).
func StartBackfill(d Dialect, b store.Backfill, now time.Time, staleAfter time.Duration) (string, []any) {
	heard, args := heardNow(d, now)
	stale, sargs := staleSince(d, now, staleAfter)
	q := `INSERT INTO backfills (` + backfillColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` + heard + `)
		ON CONFLICT (source) DO UPDATE SET run = excluded.run, from_at = excluded.from_at, to_at = excluded.to_at,
			dry_run = excluded.dry_run, started_by = excluded.started_by, state = excluded.state, progress = excluded.progress,
			error = excluded.error, started_at = excluded.started_at, finished_at = excluded.finished_at, heard_at = excluded.heard_at
		WHERE backfills.state <> 'running' OR backfills.` + stale + `
		RETURNING heard_at`
	all := []any{b.Source, b.Run, d.Time(b.From), nullTime(d, b.To), b.DryRun, store.Text(b.By), b.State, string(b.Progress), store.Text(b.Error),
		d.Time(b.StartedAt), nullTime(d, b.FinishedAt)}
	all = append(append(all, args...), sargs...)
	return d.Rebind(q), all
}

// SaveBackfill returns the statement that writes b, heard from now, over
// its source's latest backfill if that is b's run, and its arguments.
func SaveBackfill(d Dialect, b store.Backfill, now time.Time) (string, []any) {
	heard, args := heardNow(d, now)
	q := `UPDATE backfills SET state = ?, progress = ?, error = ?, finished_at = ?, heard_at = ` + heard + ` WHERE source = ? AND run = ?`
	all := append([]any{b.State, string(b.Progress), store.Text(b.Error), nullTime(d, b.FinishedAt)}, args...)
	return d.Rebind(q), append(all, b.Source, b.Run)
}

// LatestBackfill returns the query that reads source's latest backfill
// with its staleness (ScanBackfill reads its row), and its arguments.
func LatestBackfill(d Dialect, source string, now time.Time, staleAfter time.Duration) (string, []any) {
	stale, args := staleSince(d, now, staleAfter)
	q := `SELECT ` + backfillColumns + `, (state = 'running' AND ` + stale + `) FROM backfills WHERE source = ?`
	return d.Rebind(q), append(args, source)
}

// ScanBackfill scans a row of LatestBackfill.
func ScanBackfill(sc Scanner) (store.Backfill, error) {
	var b store.Backfill
	var progress string
	err := sc.Scan(&b.Source, &b.Run, Time(&b.From), Time(&b.To), &b.DryRun, &b.By, &b.State, &progress, &b.Error,
		Time(&b.StartedAt), Time(&b.FinishedAt), Time(&b.HeardAt), &b.Stale)
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
