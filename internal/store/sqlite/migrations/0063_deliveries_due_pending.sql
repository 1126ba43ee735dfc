-- deliveries_due holds only the pending deliveries, as on PostgreSQL:
-- claims read nothing else. It held every delivery under its status, so an
-- ingest (which claims: delivering) and its outcome (delivered) each wrote
-- it, and the delivered stayed in it for ever. The blocked objects of an
-- ordered claim read the delivering and held through
-- deliveries_destination_status (order.go).
--
-- The last success of a destination was a max over that index's delivered
-- entries: the counter row of its delivered deliveries keeps it now, in the
-- same write as its count.
ALTER TABLE delivery_counts ADD COLUMN last_at INTEGER; -- status 'delivered': the latest next_attempt_at (when it finished)
UPDATE delivery_counts SET last_at = (SELECT max(next_attempt_at) FROM deliveries
	WHERE deliveries.destination = delivery_counts.destination AND deliveries.status = 'delivered')
	WHERE status = 'delivered';

DROP TRIGGER IF EXISTS delivery_counts_insert;
CREATE TRIGGER delivery_counts_insert AFTER INSERT ON deliveries BEGIN
	INSERT INTO delivery_counts (destination, status, n, last_at)
		VALUES (new.destination, CASE WHEN new.status = 'pending' AND new.attempt_count > 0 THEN 'retrying' ELSE new.status END, 1,
			CASE WHEN new.status = 'delivered' THEN new.next_attempt_at END)
		ON CONFLICT (destination, status) DO UPDATE SET n = n + 1, last_at = coalesce(max(last_at, excluded.last_at), last_at, excluded.last_at);
	INSERT INTO activity (minute, destination, kind, n)
		SELECT new.created_at / 60000000, new.destination, 'replayed', 1 WHERE new.replay
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
	INSERT INTO activity (minute, destination, kind, n)
		SELECT new.created_at / 60000000, '', 'skipped', 1 WHERE new.status = 'skipped'
			AND NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.event_id = new.event_id AND o.status = 'skipped' AND o.id <> new.id)
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
END;

DROP TRIGGER IF EXISTS delivery_counts_update;
CREATE TRIGGER delivery_counts_update AFTER UPDATE OF status, destination, attempt_count ON deliveries
	WHEN CASE WHEN old.status = 'pending' AND old.attempt_count > 0 THEN 'retrying' ELSE old.status END <> CASE WHEN new.status = 'pending' AND new.attempt_count > 0 THEN 'retrying' ELSE new.status END OR old.destination <> new.destination BEGIN
	UPDATE delivery_counts SET n = n - 1 WHERE destination = old.destination AND status = CASE WHEN old.status = 'pending' AND old.attempt_count > 0 THEN 'retrying' ELSE old.status END;
	INSERT INTO delivery_counts (destination, status, n, last_at)
		VALUES (new.destination, CASE WHEN new.status = 'pending' AND new.attempt_count > 0 THEN 'retrying' ELSE new.status END, 1,
			CASE WHEN new.status = 'delivered' THEN new.next_attempt_at END)
		ON CONFLICT (destination, status) DO UPDATE SET n = n + 1, last_at = coalesce(max(last_at, excluded.last_at), last_at, excluded.last_at);
	INSERT INTO activity (minute, destination, kind, n)
		SELECT new.updated_at / 60000000, new.destination, new.status, 1 WHERE new.status IN ('delivered', 'dead') AND old.status <> new.status
			AND new.resolution <> 'marked_delivered'
		ON CONFLICT (minute, destination, kind) DO UPDATE SET n = n + 1;
END;

-- Built in the migration's write transaction from every delivery: ingest
-- waits for it (BENCHMARKS.md, "The read side at scale").
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (destination, next_attempt_at) WHERE status = 'pending';
