-- Counters the overview, /metrics and the deliveries' counts read instead
-- of counting rows, kept by triggers in the transaction that writes the
-- rows they count: they cannot drift from what was committed.
--
-- delivery_counts: deliveries per destination and status, retrying told
-- apart from pending (a pending delivery with an attempt behind it).
CREATE TABLE delivery_counts (
	destination TEXT NOT NULL,
	status      TEXT NOT NULL,
	n           INTEGER NOT NULL,
	PRIMARY KEY (destination, status)
) WITHOUT ROWID;

-- activity: what happened per minute (transitions, not states: a replay
-- later does not rewrite a minute in which deliveries went dead).
-- destination '' holds what happened to events: received, stale (a stale
-- event received), skipped (a stale event whose deliveries were skipped).
-- Per destination: delivered (a 2xx: not a person's mark), dead (went
-- dead), failed (an attempt that got no 2xx), replayed (a replay delivery
-- created).
CREATE TABLE activity (
	minute      INTEGER NOT NULL,   -- Unix time / 60
	destination TEXT NOT NULL,
	kind        TEXT NOT NULL,
	n           INTEGER NOT NULL,
	PRIMARY KEY (minute, destination, kind)
) WITHOUT ROWID;

CREATE TRIGGER delivery_counts_insert AFTER INSERT ON deliveries BEGIN
	INSERT INTO delivery_counts (destination, status, n) VALUES (new.destination, CASE WHEN new.status = 'pending' AND new.attempt_count > 0 THEN 'retrying' ELSE new.status END, 1)
		ON CONFLICT (destination, status) DO UPDATE SET n = n + 1;
	INSERT INTO activity (minute, destination, kind, n)
		SELECT new.created_at / 60000000, new.destination, 'replayed', 1 WHERE new.replay
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
	INSERT INTO activity (minute, destination, kind, n)
		SELECT new.created_at / 60000000, '', 'skipped', 1 WHERE new.status = 'skipped'
			AND NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.event_id = new.event_id AND o.status = 'skipped' AND o.id <> new.id)
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER delivery_counts_update AFTER UPDATE OF status, destination, attempt_count ON deliveries
	WHEN CASE WHEN old.status = 'pending' AND old.attempt_count > 0 THEN 'retrying' ELSE old.status END <> CASE WHEN new.status = 'pending' AND new.attempt_count > 0 THEN 'retrying' ELSE new.status END OR old.destination <> new.destination BEGIN
	UPDATE delivery_counts SET n = n - 1 WHERE destination = old.destination AND status = CASE WHEN old.status = 'pending' AND old.attempt_count > 0 THEN 'retrying' ELSE old.status END;
	INSERT INTO delivery_counts (destination, status, n) VALUES (new.destination, CASE WHEN new.status = 'pending' AND new.attempt_count > 0 THEN 'retrying' ELSE new.status END, 1)
		ON CONFLICT (destination, status) DO UPDATE SET n = n + 1;
	INSERT INTO activity (minute, destination, kind, n)
		SELECT new.updated_at / 60000000, new.destination, new.status, 1 WHERE new.status IN ('delivered', 'dead') AND old.status <> new.status
			AND new.resolution <> 'marked_delivered'
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER delivery_counts_delete AFTER DELETE ON deliveries BEGIN
	UPDATE delivery_counts SET n = n - 1 WHERE destination = old.destination AND status = CASE WHEN old.status = 'pending' AND old.attempt_count > 0 THEN 'retrying' ELSE old.status END;
END;

CREATE TRIGGER activity_event AFTER INSERT ON events BEGIN
	INSERT INTO activity (minute, destination, kind, n) VALUES (new.received_at / 60000000, '', 'received', 1)
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
	INSERT INTO activity (minute, destination, kind, n)
		SELECT new.received_at / 60000000, '', 'stale', 1 WHERE new.stale
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER activity_stale AFTER UPDATE OF stale ON events WHEN new.stale AND NOT old.stale BEGIN
	INSERT INTO activity (minute, destination, kind, n) VALUES (new.received_at / 60000000, '', 'stale', 1)
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER activity_attempt AFTER INSERT ON attempts WHEN new.status_code NOT BETWEEN 200 AND 299 BEGIN
	INSERT INTO activity (minute, destination, kind, n)
		SELECT new.started_at / 60000000, destination, 'failed', 1 FROM deliveries WHERE id = new.delivery_id
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
END;

-- What was there before is counted once, here (a scan of every row: the
-- migration's cost, docs/operations.md). The minutes before it are rebuilt
-- from the rows as they are now: a delivery that went dead and was replayed
-- since is resolved, so its going dead is not among them.
INSERT INTO delivery_counts (destination, status, n)
	SELECT destination, CASE WHEN status = 'pending' AND attempt_count > 0 THEN 'retrying' ELSE status END, count(*) FROM deliveries GROUP BY 1, 2;
INSERT INTO activity (minute, destination, kind, n)
	SELECT received_at / 60000000, '', 'received', count(*) FROM events GROUP BY 1;
INSERT INTO activity (minute, destination, kind, n)
	SELECT received_at / 60000000, '', 'stale', count(*) FROM events WHERE stale GROUP BY 1;
INSERT INTO activity (minute, destination, kind, n)
	SELECT updated_at / 60000000, destination, status, count(*) FROM deliveries WHERE status IN ('delivered', 'dead')
		AND resolution <> 'marked_delivered' GROUP BY 1, 2, 3;
INSERT INTO activity (minute, destination, kind, n)
	SELECT created_at / 60000000, destination, 'replayed', count(*) FROM deliveries WHERE replay GROUP BY 1, 2;
INSERT INTO activity (minute, destination, kind, n)
	SELECT a.started_at / 60000000, d.destination, 'failed', count(*) FROM attempts a JOIN deliveries d ON d.id = a.delivery_id
	WHERE a.status_code NOT BETWEEN 200 AND 299 GROUP BY 1, 2;
INSERT INTO activity (minute, destination, kind, n)
	SELECT created_at / 60000000, '', 'skipped', count(DISTINCT event_id) FROM deliveries WHERE status = 'skipped' GROUP BY 1;
