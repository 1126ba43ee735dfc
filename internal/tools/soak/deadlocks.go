package soak

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// deadlocks is PostgreSQL's count of deadlocks detected in the database of
// dsn (pg_stat_database.deadlocks), read over a direct connection: not
// through the soak's proxy, which may be cut.
//
// A backend reports its statistics when it goes idle (at most once a
// second) and when it exits. With idle set, deadlocks first waits until
// no other session is connected to the database (the gateways are
// stopped: their backends exit and flush; at most 30 s), then a second
// longer, since a backend leaves pg_stat_activity just before its last
// flush.
func deadlocks(ctx context.Context, dsn string, idle bool) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("read pg_stat_database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if idle {
		// Bounded: a session the soak does not own (someone looking at
		// the database) must not stop the report.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			var others int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
				return 0, fmt.Errorf("read pg_stat_activity: %w", err)
			}
			if others == 0 {
				break
			}
			sleep(ctx, 100*time.Millisecond)
		}
		sleep(ctx, time.Second)
	}
	var n int64
	if err := conn.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read pg_stat_database: %w", err)
	}
	return n, nil
}
