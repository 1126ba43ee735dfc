package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// Ping answers from the schema: a database that lost its tables is down,
// although SELECT 1 still answers.
func TestPingNeedsTheSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of a fresh store: %v", err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), `DROP TABLE schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, anyhook.ErrUnavailable) {
		t.Fatalf("Ping without the schema = %v, want ErrUnavailable", err)
	}
}
