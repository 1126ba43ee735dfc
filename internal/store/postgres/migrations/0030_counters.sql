-- Counters the overview, /metrics and the deliveries' counts read instead
-- of counting rows, kept by statement-level triggers in the transaction
-- that writes the rows they count (one upsert per group a statement
-- touches, not per row).
--
-- Each backend adds to rows of its own (shard = its pg_backend_pid()):
-- a backend runs one transaction at a time, so two transactions never
-- wait for each other on a counter row, across processes. Readers add the
-- shards up; the store folds the rows of other shards into shard 0 now and
-- then (FOR UPDATE SKIP LOCKED: it never waits for a writer either).
--
-- delivery_counts: deliveries per destination and status, retrying told
-- apart from pending (a pending delivery with an attempt behind it).
CREATE TABLE delivery_counts (
	destination text COLLATE "C" NOT NULL,
	status      text COLLATE "C" NOT NULL,
	shard       integer NOT NULL,
	n           bigint NOT NULL,
	PRIMARY KEY (destination, status, shard)
);

-- activity: what happened per minute (transitions, not states: a replay
-- later does not rewrite a minute in which deliveries went dead).
-- destination '' holds what happened to events: received, stale (a stale
-- event received), skipped (a stale event whose deliveries were skipped).
-- Per destination: delivered (a 2xx: not a person's mark), dead (went
-- dead), failed (an attempt that got no 2xx), replayed (a replay delivery
-- created).
CREATE TABLE activity (
	minute      bigint NOT NULL,   -- Unix time / 60
	destination text COLLATE "C" NOT NULL,
	kind        text COLLATE "C" NOT NULL,
	shard       integer NOT NULL,
	n           bigint NOT NULL,
	PRIMARY KEY (minute, destination, kind, shard)
);

-- The rows a fold moves: few, among many folded ones.
CREATE INDEX activity_unfolded ON activity (minute) WHERE shard <> 0;

CREATE FUNCTION anyhook_depth_status(status text, attempt_count integer) RETURNS text LANGUAGE sql IMMUTABLE
	AS $$ SELECT CASE WHEN status = 'pending' AND attempt_count > 0 THEN 'retrying' ELSE status END $$;

CREATE FUNCTION anyhook_minute(t timestamptz) RETURNS bigint LANGUAGE sql IMMUTABLE
	AS $$ SELECT floor(extract(epoch FROM t) / 60)::bigint $$;

CREATE FUNCTION anyhook_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO delivery_counts (destination, status, shard, n)
		SELECT destination, anyhook_depth_status(status, attempt_count), pg_backend_pid(), count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT (destination, status, shard) DO UPDATE SET n = delivery_counts.n + excluded.n;
	INSERT INTO activity (minute, destination, kind, shard, n)
		SELECT anyhook_minute(created_at), destination, 'replayed', pg_backend_pid(), count(*) FROM new_rows WHERE replay GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT (minute, destination, kind, shard) DO UPDATE SET n = activity.n + excluded.n;
	INSERT INTO activity (minute, destination, kind, shard, n)
		SELECT anyhook_minute(min(created_at)), '', 'skipped', pg_backend_pid(), 1 FROM new_rows n WHERE n.status = 'skipped'
			AND NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.event_id = n.event_id AND o.status = 'skipped'
				AND o.id NOT IN (SELECT id FROM new_rows))
			GROUP BY n.event_id ORDER BY 1
		ON CONFLICT (minute, destination, kind, shard) DO UPDATE SET n = activity.n + excluded.n;
	RETURN NULL;
END $$;

CREATE FUNCTION anyhook_counts_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO delivery_counts (destination, status, shard, n)
		SELECT destination, status, pg_backend_pid(), sum(d) FROM (
			SELECT o.destination, anyhook_depth_status(o.status, o.attempt_count) AS status, -1 AS d FROM old_rows o JOIN new_rows n ON n.id = o.id
				WHERE anyhook_depth_status(o.status, o.attempt_count) <> anyhook_depth_status(n.status, n.attempt_count) OR o.destination <> n.destination
			UNION ALL
			SELECT n.destination, anyhook_depth_status(n.status, n.attempt_count), 1 FROM old_rows o JOIN new_rows n ON n.id = o.id
				WHERE anyhook_depth_status(o.status, o.attempt_count) <> anyhook_depth_status(n.status, n.attempt_count) OR o.destination <> n.destination) c
		GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT (destination, status, shard) DO UPDATE SET n = delivery_counts.n + excluded.n;
	INSERT INTO activity (minute, destination, kind, shard, n)
		SELECT anyhook_minute(n.updated_at), n.destination, n.status, pg_backend_pid(), count(*)
			FROM old_rows o JOIN new_rows n ON n.id = o.id
			WHERE n.status IN ('delivered', 'dead') AND o.status <> n.status AND n.resolution <> 'marked_delivered'
			GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
		ON CONFLICT (minute, destination, kind, shard) DO UPDATE SET n = activity.n + excluded.n;
	RETURN NULL;
END $$;

CREATE FUNCTION anyhook_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO delivery_counts (destination, status, shard, n)
		SELECT destination, anyhook_depth_status(status, attempt_count), pg_backend_pid(), -count(*) FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT (destination, status, shard) DO UPDATE SET n = delivery_counts.n + excluded.n;
	RETURN NULL;
END $$;

CREATE FUNCTION anyhook_activity_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO activity (minute, destination, kind, shard, n)
			SELECT anyhook_minute(received_at), '', k, pg_backend_pid(), count(*)
			FROM new_rows, LATERAL (VALUES ('received'), ('stale')) AS ks (k) WHERE k = 'received' OR stale
			GROUP BY 1, 3 ORDER BY 1, 3
			ON CONFLICT (minute, destination, kind, shard) DO UPDATE SET n = activity.n + excluded.n;
	ELSE
		INSERT INTO activity (minute, destination, kind, shard, n)
			SELECT anyhook_minute(n.received_at), '', 'stale', pg_backend_pid(), count(*)
			FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE n.stale AND NOT o.stale GROUP BY 1 ORDER BY 1
			ON CONFLICT (minute, destination, kind, shard) DO UPDATE SET n = activity.n + excluded.n;
	END IF;
	RETURN NULL;
END $$;

CREATE FUNCTION anyhook_activity_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO activity (minute, destination, kind, shard, n)
		SELECT anyhook_minute(a.started_at), d.destination, 'failed', pg_backend_pid(), count(*)
		FROM new_rows a JOIN deliveries d ON d.id = a.delivery_id
		WHERE a.status_code NOT BETWEEN 200 AND 299 GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT (minute, destination, kind, shard) DO UPDATE SET n = activity.n + excluded.n;
	RETURN NULL;
END $$;

CREATE TRIGGER delivery_counts_insert AFTER INSERT ON deliveries REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION anyhook_counts_insert();
CREATE TRIGGER delivery_counts_update AFTER UPDATE ON deliveries REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION anyhook_counts_update();
CREATE TRIGGER delivery_counts_delete AFTER DELETE ON deliveries REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION anyhook_counts_delete();
CREATE TRIGGER activity_events_insert AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION anyhook_activity_events();
CREATE TRIGGER activity_events_update AFTER UPDATE ON events REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION anyhook_activity_events();
CREATE TRIGGER activity_attempts AFTER INSERT ON attempts REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION anyhook_activity_attempts();

-- What was there before is counted once, here, after the triggers took
-- their tables' locks (no write can slip between the count and them): a
-- scan of every row, the migration's cost (docs/operations.md). The
-- minutes before it are rebuilt from the rows as they are now: a delivery
-- that went dead and was replayed since is resolved, so its going dead is
-- not among them.
INSERT INTO delivery_counts (destination, status, shard, n)
	SELECT destination, anyhook_depth_status(status, attempt_count), 0, count(*) FROM deliveries GROUP BY 1, 2;
INSERT INTO activity (minute, destination, kind, shard, n)
	SELECT anyhook_minute(received_at), '', 'received', 0, count(*) FROM events GROUP BY 1;
INSERT INTO activity (minute, destination, kind, shard, n)
	SELECT anyhook_minute(received_at), '', 'stale', 0, count(*) FROM events WHERE stale GROUP BY 1;
INSERT INTO activity (minute, destination, kind, shard, n)
	SELECT anyhook_minute(updated_at), destination, status, 0, count(*) FROM deliveries WHERE status IN ('delivered', 'dead')
		AND resolution <> 'marked_delivered' GROUP BY 1, 2, 3;
INSERT INTO activity (minute, destination, kind, shard, n)
	SELECT anyhook_minute(created_at), destination, 'replayed', 0, count(*) FROM deliveries WHERE replay GROUP BY 1, 2;
INSERT INTO activity (minute, destination, kind, shard, n)
	SELECT anyhook_minute(a.started_at), d.destination, 'failed', 0, count(*) FROM attempts a JOIN deliveries d ON d.id = a.delivery_id
	WHERE a.status_code NOT BETWEEN 200 AND 299 GROUP BY 1, 2;
INSERT INTO activity (minute, destination, kind, shard, n)
	SELECT anyhook_minute(created_at), '', 'skipped', 0, count(DISTINCT event_id) FROM deliveries WHERE status = 'skipped' GROUP BY 1;
