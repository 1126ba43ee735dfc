package sqlite

import (
	"context"
	"database/sql"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// Delivery implements store.DeliveryReader.
func (s *Store) Delivery(ctx context.Context, id string) (anyhook.Delivery, error) {
	return sqlstore.Delivery(id, s.r.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, id), sql.ErrNoRows)
}

// QueueRows implements store.QueueReader.
func (s *Store) QueueRows(ctx context.Context, ids []string) (map[string]store.QueueRow, error) {
	return sqlstore.QueueRows(ids, func(ids []string) ([]sqlstore.QueueRowScan, error) {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		return query(ctx, s.r, sqlstore.ScanQueueRow, `SELECT d.id, coalesce(e.dedup_key, ''), coalesce(a.number, 0), coalesce(a.started_at, 0),
			coalesce(a.duration_us, 0), coalesce(a.status_code, 0), coalesce(a.error, ''), coalesce(a.outcome, '')
		FROM deliveries d JOIN events e ON e.id = d.event_id
		LEFT JOIN attempts a ON a.delivery_id = d.id AND a.number = (SELECT max(number) FROM attempts WHERE delivery_id = d.id)
		WHERE d.id IN (`+placeholders(len(ids))+`)`, args...)
	})
}

// DiscardDestination implements store.DestinationDiscarder.
func (s *Store) DiscardDestination(ctx context.Context, destination string, by store.Actor) (int, error) {
	var n int
	err := s.tx(ctx, "discard destination", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, event_id FROM deliveries
			WHERE destination = ? AND status IN ('pending', 'held', 'dead') ORDER BY id`, destination)
		if err != nil {
			return store.Unavailable("discard destination", err)
		}
		pairs, err := sqlstore.Collect(rows, sqlstore.ScanPair)
		rows.Close()
		if err != nil {
			return store.Unavailable("discard destination", err)
		}
		var ids, events []string
		for _, p := range pairs {
			ids, events = append(ids, p[0]), append(events, p[1])
		}
		now := s.now()
		at := micros(now)
		note := store.Note("discarded", by, now)
		for i, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET status = 'resolved', resolution = ?, resolved_at = ?, resolved_by = ?,
					resolution_reason = ?, note = ?, lease_until = NULL, updated_at = ?
				WHERE id = ?`, anyhook.ResolvedDiscarded, at, store.ActorName(by), by.Reason, note, at, id); err != nil {
				return store.Unavailable("discard destination", err)
			}
			if err := s.recordAction(ctx, tx, events[i], id, destination, store.ActionDiscard, by, now); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	return n, err
}
