// Package pgtest gives each test its own fresh PostgreSQL database on the
// server named by $ANYHOOK_TEST_POSTGRES (default
// postgres://postgres@127.0.0.1:5432/postgres). Without a reachable server a
// test is skipped with a hint, except under CI=true, where it fails: CI must
// never skip the PostgreSQL tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/testkit/faultnet"
)

// ServerDSN is the maintenance connection string.
func ServerDSN() string {
	if s := os.Getenv("ANYHOOK_TEST_POSTGRES"); s != "" {
		return s
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// DSN creates a new empty database for t, drops it when t ends, and returns
// its connection string.
func DSN(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, ServerDSN())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL tests must run in CI, but the server is unreachable: %v", err)
		}
		t.Skipf("PostgreSQL unreachable (%v); start one (scripts/postgres.sh) or set ANYHOOK_TEST_POSTGRES to run this test", err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	rand.Read(b)
	name := "anyhook_test_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, ServerDSN())
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(ServerDSN())
	if err != nil {
		t.Fatalf("parse %s: %v", ServerDSN(), err)
	}
	u.Path = "/" + name
	return fmt.Sprint(u)
}

// Proxy puts a TCP proxy the test can cut (or hold the replies of)
// between the client and target; it is closed when t ends.
func Proxy(t testing.TB, target string) *faultnet.Proxy {
	t.Helper()
	p, err := faultnet.NewProxy(target)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// OnCommit is a pgx tracer that calls Fn when a COMMIT is about to be
// sent, once Armed.
type OnCommit struct {
	Armed atomic.Bool
	Fn    func()
}

// TraceQueryStart implements pgx.QueryTracer.
func (o *OnCommit) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.EqualFold(strings.TrimSpace(d.SQL), "commit") && o.Armed.CompareAndSwap(true, false) {
		o.Fn()
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (o *OnCommit) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// CommitHold is the database of a test reached through a Proxy whose
// Tracer, once Armed, holds the replies from the next COMMIT on: the
// COMMIT reaches the server and its answer waits (until
// Proxy.ReleaseReplies). Committing is closed when that happens.
type CommitHold struct {
	DSN        string // through the proxy
	Proxy      *faultnet.Proxy
	Tracer     *OnCommit
	Committing chan struct{}
}

// HoldCommit puts a CommitHold in front of the database of dsn.
func HoldCommit(t testing.TB, dsn string) *CommitHold {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	h := &CommitHold{Proxy: Proxy(t, u.Host), Committing: make(chan struct{})}
	u.Host = h.Proxy.Addr()
	h.DSN = u.String()
	h.Tracer = &OnCommit{Fn: func() {
		h.Proxy.HoldReplies()
		close(h.Committing)
	}}
	return h
}
