package sqlite_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/sqlitewrap"
)

// TestUnsyncedFinishThatFailsLeavesTheWriterSynced: Finish sets its
// connection to synchronous=NORMAL, and the PRAGMA can take effect yet
// report an error (the context ends just as it finishes: the driver then
// answers ctx.Err()). The connection must not go back to the pool at
// NORMAL, or the next ingest commits without fsync and answers 2xx for an
// event a power loss can take. The wrapped driver records the real
// synchronous level of the connection at every BEGIN of the ingest that
// follows.
func TestUnsyncedFinishThatFailsLeavesTheWriterSynced(t *testing.T) {
	d := registerSyncFault()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{Driver: syncFaultName})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ingest := func() {
		t.Helper()
		id := store.NewID()
		res, err := s.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{ID: id, Source: "s", DedupKey: id, ReceivedAt: time.Now(), Body: []byte(`{}`)},
			Destinations: []string{"d"}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("Ingest: %v %v", err, res)
		}
	}
	ingest()
	cs, err := s.Claim(t.Context(), "d", 1, time.Hour)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claimed %d: %v", len(cs), err)
	}
	out := store.Outcome{DeliveryID: cs[0].Delivery.ID, Attempt: cs[0].Delivery.AttemptCount, Status: anyhook.StatusDelivered,
		Result: anyhook.Attempt{Number: cs[0].Delivery.AttemptCount, StartedAt: time.Now(), StatusCode: 200}}
	d.failNormal.Store(true)
	if _, err := s.Finish(t.Context(), []store.Outcome{out}); err == nil {
		t.Fatal("Finish succeeded though setting its sync level failed")
	}
	d.levels()
	ingest()
	for _, l := range d.levels() {
		if l != 2 {
			t.Fatalf("the ingest after a failed Finish began with synchronous=%d (2 is FULL): its commit does not wait for fsync", l)
		}
	}
	if _, err := s.Finish(t.Context(), []store.Outcome{out}); err != nil {
		t.Fatalf("Finish again: %v", err)
	}
}

const syncFaultName = "sqlite-syncfault"

var syncFault struct {
	once sync.Once
	d    *syncFaultDriver
}

// registerSyncFault registers (once) a wrapper of modernc.org/sqlite that
// can make PRAGMA synchronous = NORMAL take effect and still fail, and
// records the connection's level at each BEGIN.
func registerSyncFault() *syncFaultDriver {
	syncFault.once.Do(func() {
		d := &syncFaultDriver{}
		syncFault.d = d
		sql.Register(syncFaultName, sqlitewrap.Driver(func(c sqlitewrap.Conn) driver.Conn { return &syncFaultConn{c, d} }))
	})
	return syncFault.d
}

type syncFaultDriver struct {
	failNormal atomic.Bool
	mu         sync.Mutex
	began      []int64 // synchronous at each BEGIN since levels was last called
}

// levels returns the levels recorded at BEGIN since its last call.
func (d *syncFaultDriver) levels() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.began
	d.began = nil
	return l
}

type syncFaultConn struct {
	sqlitewrap.Conn
	d *syncFaultDriver
}

func (c *syncFaultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.Conn.ExecContext(ctx, query, args)
	if err == nil && query == "PRAGMA synchronous = NORMAL" && c.d.failNormal.CompareAndSwap(true, false) {
		return nil, context.Canceled // it took effect; the caller hears otherwise
	}
	return r, err
}

func (c *syncFaultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	rows, err := c.Conn.QueryContext(ctx, "PRAGMA synchronous", nil)
	if err != nil {
		return nil, err
	}
	v := make([]driver.Value, 1)
	err = rows.Next(v)
	rows.Close()
	if err != nil && err != io.EOF {
		return nil, err
	}
	c.d.mu.Lock()
	c.d.began = append(c.d.began, v[0].(int64))
	c.d.mu.Unlock()
	return c.Conn.BeginTx(ctx, opts)
}

func (c *syncFaultConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}
