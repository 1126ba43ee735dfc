-- Backfills (docs/backfill.md): the latest backfill of each source, so that
-- every process sharing the database answers for it and it outlives the
-- process that ran it. run is the backfill's own id; heard_at is when its
-- process last wrote it (a running backfill not heard from for long ran in
-- a process that stopped). to_at and finished_at NULL for none. A new
-- table: it locks nothing that exists.
CREATE TABLE backfills (
	source      text PRIMARY KEY,
	run         text NOT NULL,
	from_at     timestamptz NOT NULL,
	to_at       timestamptz,
	dry_run     boolean NOT NULL,
	started_by  text NOT NULL,
	state       text NOT NULL,
	progress    text NOT NULL,
	error       text NOT NULL,
	started_at  timestamptz NOT NULL,
	finished_at timestamptz,
	heard_at    timestamptz NOT NULL
);
