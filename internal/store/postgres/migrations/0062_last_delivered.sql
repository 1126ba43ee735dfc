-- Each destination's last success is kept with its delivered count: the
-- latest next_attempt_at (when it finished) of its delivered deliveries.
-- It was read from the newest delivered delivery, which misses an older
-- one retried until it succeeded later. As on SQLite (its 0063).
ALTER TABLE delivery_counts ADD COLUMN last_at timestamptz;

INSERT INTO delivery_counts (destination, status, shard, n, last_at)
	SELECT destination, 'delivered', 0, 0, max(next_attempt_at) FROM deliveries WHERE status = 'delivered' GROUP BY 1 ORDER BY 1
	ON CONFLICT (destination, status, shard) DO UPDATE SET last_at = excluded.last_at;

CREATE OR REPLACE FUNCTION anyhook_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO delivery_counts (destination, status, shard, n, last_at)
		SELECT destination, anyhook_depth_status(status, attempt_count), pg_backend_pid(), count(*),
			max(next_attempt_at) FILTER (WHERE status = 'delivered')
		FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT (destination, status, shard) DO UPDATE SET n = delivery_counts.n + excluded.n,
			last_at = greatest(delivery_counts.last_at, excluded.last_at);
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

CREATE OR REPLACE FUNCTION anyhook_counts_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO delivery_counts (destination, status, shard, n, last_at)
		SELECT destination, status, pg_backend_pid(), sum(d), max(t) FROM (
			SELECT o.destination, anyhook_depth_status(o.status, o.attempt_count) AS status, -1 AS d, NULL::timestamptz AS t
				FROM old_rows o JOIN new_rows n ON n.id = o.id
				WHERE anyhook_depth_status(o.status, o.attempt_count) <> anyhook_depth_status(n.status, n.attempt_count) OR o.destination <> n.destination
			UNION ALL
			SELECT n.destination, anyhook_depth_status(n.status, n.attempt_count), 1, CASE WHEN n.status = 'delivered' THEN n.next_attempt_at END
				FROM old_rows o JOIN new_rows n ON n.id = o.id
				WHERE anyhook_depth_status(o.status, o.attempt_count) <> anyhook_depth_status(n.status, n.attempt_count) OR o.destination <> n.destination) c
		GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT (destination, status, shard) DO UPDATE SET n = delivery_counts.n + excluded.n,
			last_at = greatest(delivery_counts.last_at, excluded.last_at);
	INSERT INTO activity (minute, destination, kind, shard, n)
		SELECT anyhook_minute(n.updated_at), n.destination, n.status, pg_backend_pid(), count(*)
			FROM old_rows o JOIN new_rows n ON n.id = o.id
			WHERE n.status IN ('delivered', 'dead') AND o.status <> n.status AND n.resolution <> 'marked_delivered'
			GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
		ON CONFLICT (minute, destination, kind, shard) DO UPDATE SET n = activity.n + excluded.n;
	RETURN NULL;
END $$;

-- CREATE OR REPLACE drops the functions' settings: pinned again (0033).
DO $$
BEGIN
	EXECUTE format('ALTER FUNCTION anyhook_counts_insert() SET search_path = %I, pg_temp', current_schema());
	EXECUTE format('ALTER FUNCTION anyhook_counts_update() SET search_path = %I, pg_temp', current_schema());
END $$;
