-- Backfills (docs/backfill.md): the latest backfill of each source, so that
-- every process sharing the database answers for it and it outlives the
-- process that ran it. run is the backfill's own id; heard_at is when its
-- process last wrote it (a running backfill not heard from for long ran in
-- a process that stopped). Times in Unix microseconds; to_at and
-- finished_at NULL for none.
CREATE TABLE backfills (
	source      TEXT PRIMARY KEY,
	run         TEXT NOT NULL,
	from_at     INTEGER NOT NULL,
	to_at       INTEGER,
	dry_run     INTEGER NOT NULL,
	started_by  TEXT NOT NULL,
	state       TEXT NOT NULL,
	progress    TEXT NOT NULL,
	error       TEXT NOT NULL,
	started_at  INTEGER NOT NULL,
	finished_at INTEGER,
	heard_at    INTEGER NOT NULL
);
