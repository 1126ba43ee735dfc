package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// Delivery implements store.DeliveryReader.
func (s *Store) Delivery(ctx context.Context, id string) (anyhook.Delivery, error) {
	return sqlstore.Delivery(id, s.pool.QueryRow(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = $1`, id), pgx.ErrNoRows)
}

// QueueRows implements store.QueueReader.
func (s *Store) QueueRows(ctx context.Context, ids []string) (map[string]store.QueueRow, error) {
	return sqlstore.QueueRows(ids, func(ids []string) ([]sqlstore.QueueRowScan, error) {
		rows, err := s.pool.Query(ctx, `SELECT d.id, coalesce(e.dedup_key, ''), coalesce(a.number, 0), a.started_at,
			coalesce(a.duration_us, 0), coalesce(a.status_code, 0), coalesce(a.error, ''), coalesce(a.outcome, '')
		FROM deliveries d JOIN events e ON e.id = d.event_id
		LEFT JOIN LATERAL (SELECT * FROM attempts WHERE delivery_id = d.id ORDER BY number DESC LIMIT 1) a ON true
		WHERE d.id = ANY($1)`, ids)
		if err != nil {
			return nil, err
		}
		return collect(rows, sqlstore.ScanQueueRow)
	})
}

// DiscardDestination implements store.DestinationDiscarder.
func (s *Store) DiscardDestination(ctx context.Context, destination string, by store.Actor) (int, error) {
	var n int
	by = store.Actor{Name: text(store.ActorName(by)), Reason: text(by.Reason)}
	err := s.tx(ctx, "discard destination", func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return store.Unavailable("discard destination", err)
		}
		rows, err := tx.Query(ctx, `SELECT id, event_id FROM deliveries
			WHERE destination = $1 AND status IN ('pending', 'held', 'dead') ORDER BY id FOR UPDATE`, destination)
		if err != nil {
			return store.Unavailable("discard destination", err)
		}
		pairs, err := collect(rows, sqlstore.ScanPair)
		if err != nil {
			return store.Unavailable("discard destination", err)
		}
		var ids, events, actions []string
		for _, p := range pairs {
			ids, events, actions = append(ids, p[0]), append(events, p[1]), append(actions, store.NewID())
		}
		n = len(ids)
		if n == 0 {
			return nil
		}
		b := &pgx.Batch{}
		b.Queue(`UPDATE deliveries SET status = 'resolved', resolution = $2, resolved_at = now(), resolved_by = $3,
				resolution_reason = $4, note = $5, lease_until = NULL, updated_at = now()
			WHERE id = ANY($1)`, ids, anyhook.ResolvedDiscarded, by.Name, by.Reason, text(store.Note("discarded", by, now)))
		b.Queue(`INSERT INTO actions (id, event_id, delivery_id, destination, action, actor, reason, at)
			SELECT r.action, r.event_id, r.id, $4, $5, $6, $7, now()
			FROM unnest($1::text[], $2::text[], $3::text[]) AS r (action, id, event_id)`,
			actions, ids, events, destination, store.ActionDiscard, by.Name, by.Reason)
		return store.Unavailable("discard destination", tx.SendBatch(ctx, b).Close())
	})
	return n, err
}
