package sqlstore

import (
	"bytes"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

func TestDeliveryWherePlaceholders(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	f := store.DeliveryFilter{Status: anyhook.StatusDead, Destination: "billing", Since: since, Cursor: "c"}
	for _, tc := range []struct {
		d     Dialect
		where string
		args  []any
	}{
		// A time window pages by (created_at, id): the cursor's time is
		// read by subquery.
		{SQLite, " WHERE d.status = ? AND d.destination = ? AND d.created_at >= ? AND d.created_at <= (SELECT c.created_at FROM deliveries c WHERE c.id = ?)" +
			" AND (d.created_at < (SELECT c.created_at FROM deliveries c WHERE c.id = ?) OR d.id < ?)", []any{"dead", "billing", since.UnixMicro(), "c", "c", "c"}},
		{Postgres, " WHERE d.status = $1 AND d.destination = $2 AND d.created_at >= $3 AND d.created_at <= (SELECT c.created_at FROM deliveries c WHERE c.id = $4)" +
			" AND (d.created_at < (SELECT c.created_at FROM deliveries c WHERE c.id = $5) OR d.id < $6)", []any{"dead", "billing", since, "c", "c", "c"}},
	} {
		where, args := DeliveryWhere(tc.d, f, nil)
		if where != tc.where || !reflect.DeepEqual(args, tc.args) {
			t.Errorf("DeliveryWhere = %q %v, want %q %v", where, args, tc.where, tc.args)
		}
	}
	if where, args := DeliveryWhere(SQLite, store.DeliveryFilter{Status: anyhook.StatusDead, Cursor: "c"}, nil); where != " WHERE d.status = ? AND d.id < ?" || len(args) != 2 {
		t.Errorf("without a window: %q %v", where, args)
	}
	if where, args := DeliveryWhere(Postgres, store.DeliveryFilter{}, nil); where != "" || len(args) != 0 {
		t.Errorf("empty filter: %q %v", where, args)
	}
}

func TestTimeScansBothDialects(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		src  any
		want time.Time
	}{
		{nil, time.Time{}},
		{int64(0), time.Time{}},
		{at.UnixMicro(), at.UTC()},
		{at, at.UTC()},
		{time.Time{}, time.Time{}},
	} {
		got := time.Unix(1, 0) // overwritten, also by a NULL
		if err := Time(&got).(interface{ Scan(any) error }).Scan(tc.src); err != nil || !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("Scan(%v) = %v (%v), %v; want %v UTC", tc.src, got, got.Location(), err, tc.want)
		}
	}
	var got time.Time
	if err := Time(&got).(interface{ Scan(any) error }).Scan("2026-01-01"); err == nil {
		t.Error("a string scanned as a time without error")
	}
}

func TestPlaceHashes(t *testing.T) {
	rows := []HashRow{{Index: 4, Hash: store.Hash{4}}, {Index: 1, Hash: store.Hash{1}}}
	got, err := PlaceHashes([]int64{1, 4, 1}, rows)
	if err != nil || !reflect.DeepEqual(got, []store.Hash{{1}, {4}, {1}}) {
		t.Fatalf("PlaceHashes = %v, %v", got, err)
	}
	if _, err := PlaceHashes([]int64{1, 2}, rows); !errors.Is(err, anyhook.ErrNotFound) {
		t.Fatalf("missing hash: %v, want ErrNotFound", err)
	}
}

func TestApply(t *testing.T) {
	ms := []Migration{{Version: 1, Name: "0001_a.sql"}, {Version: 2, Name: "0002_b.sql"}, {Version: 5, Name: "0005_c.sql"}, {Version: 7, Name: "0007_d.sql"}}
	var got []int
	_, err := Apply(nil, ms, []int{1, 5}, true, func(m Migration) error {
		got = append(got, m.Version)
		if m.Version == 7 {
			return errors.New("boom")
		}
		return nil
	})
	if err == nil || err.Error() != "boom" || !reflect.DeepEqual(got, []int{2, 7}) {
		t.Fatalf("Apply = %v, applied %v; want boom after 2 and 7", err, got)
	}
	if _, err := Apply(nil, ms, []int{1, 2, 5, 7, 8}, true, func(Migration) error { t.Fatal("applied"); return nil }); err == nil {
		t.Fatal("a schema newer than the binary was not refused")
	}
	// Not to upgrade: an older schema is refused, naming what it lacks;
	// a current one opens, and a new store's schema is created.
	for applied, want := range map[string]string{"1 5": "2 migrations, 0002_b.sql to 0007_d.sql", "1 2 5": "lacks 0007_d.sql"} {
		var vs []int
		for f := range strings.FieldsSeq(applied) {
			v, _ := strconv.Atoi(f)
			vs = append(vs, v)
		}
		_, err := Apply(nil, ms, vs, false, func(Migration) error { t.Fatal("applied"); return nil })
		if !errors.Is(err, ErrUpgradeRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("schema %s, not to upgrade: %v, want ErrUpgradeRefused naming %q", applied, err, want)
		}
	}
	if n, err := Apply(nil, ms, []int{1, 2, 5, 7}, false, func(Migration) error { t.Fatal("applied"); return nil }); err != nil || n != 0 {
		t.Fatalf("a current schema, not to upgrade: %d, %v", n, err)
	}
	if _, err := Apply(nil, ms, nil, false, func(Migration) error { t.Fatal("applied"); return nil }); !errors.Is(err, ErrNoStore) {
		t.Fatalf("no schema, not to upgrade: %v, want ErrNoStore", err)
	}
	// The log is told before, naming how many and which (Applied says
	// when the caller committed them); of none pending, nothing; a new
	// database's schema is said to be created.
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if n, err := Apply(log, ms, []int{1, 2}, true, func(Migration) error { return nil }); err != nil || n != 2 {
		t.Fatalf("Apply of two pending = %d, %v", n, err)
	}
	Applied(log, ms, 2, time.Now())
	if lines := strings.Split(strings.TrimSpace(buf.String()), "\n"); len(lines) != 2 ||
		!strings.Contains(lines[0], "applying migrations") || !strings.Contains(lines[0], "migrations=2") || !strings.Contains(lines[0], "last=0007_d.sql") ||
		!strings.Contains(lines[1], "migrations applied") || !strings.Contains(lines[1], "took=") {
		t.Errorf("log of two migrations applied:\n%s", buf.String())
	}
	buf.Reset()
	if n, err := Apply(log, ms, []int{1, 2, 5, 7}, true, func(Migration) error { t.Fatal("applied"); return nil }); err != nil || n != 0 || buf.Len() != 0 {
		t.Errorf("none pending: %d, %v, logged %q", n, err, buf.String())
	}
	Applied(log, ms, 0, time.Now())
	if buf.Len() != 0 {
		t.Errorf("none applied, logged %q", buf.String())
	}
	n, err := Apply(log, ms, nil, true, func(Migration) error { return nil })
	Applied(log, ms, n, time.Now())
	if err != nil || !strings.Contains(buf.String(), "creating the schema") || !strings.Contains(buf.String(), "schema created") ||
		strings.Contains(buf.String(), UpgradeMessage) {
		t.Errorf("a new database: %v, logged %q", err, buf.String())
	}
	// A newer binary's migration numbered below this one's newest.
	if _, err := Apply(nil, ms, []int{1, 2, 3, 5}, true, func(Migration) error { t.Fatal("applied"); return nil }); err == nil || !strings.Contains(err.Error(), "migration 3") {
		t.Fatalf("a schema with a migration the binary does not know: %v; want it refused", err)
	}
}

func TestRebind(t *testing.T) {
	q := `DELETE FROM t WHERE a = ? AND b < ?`
	if got := SQLite.Rebind(q); got != q {
		t.Errorf("SQLite.Rebind = %q", got)
	}
	if got, want := Postgres.Rebind(q), `DELETE FROM t WHERE a = $1 AND b < $2`; got != want {
		t.Errorf("Postgres.Rebind = %q, want %q", got, want)
	}
}

func TestShownIn(t *testing.T) {
	cs := []Count{{Dest: "ci", Status: anyhook.StatusPaused, N: 3}, {Dest: "billing", Status: anyhook.StatusPending, N: 1},
		{Dest: "audit", Status: anyhook.StatusPending, N: 2}, {Dest: "ledger", Status: anyhook.StatusPending, N: 0}}
	for _, c := range []struct {
		st   anyhook.DeliveryStatus
		dest string
		want []string
	}{
		{anyhook.StatusPending, "", []string{"audit", "billing"}},
		{anyhook.StatusPending, "billing", []string{"billing"}},
		{anyhook.StatusPending, "ci", nil},
		{anyhook.StatusPaused, "", []string{"ci"}},
		{anyhook.StatusRetrying, "", nil},
	} {
		if got := ShownIn(cs, c.st, c.dest); !slices.Equal(got, c.want) {
			t.Errorf("ShownIn(%s, %q) = %q, want %q", c.st, c.dest, got, c.want)
		}
	}
	if cond, args, none := StatusIs("d.", anyhook.StatusRetrying, []string{"a", "b"}); none || len(args) != 2 ||
		cond != "d.status = 'pending' AND d.attempt_count > 0 AND d.destination IN (?, ?)" {
		t.Errorf("StatusIs(retrying, a, b) = %q %v %v", cond, args, none)
	}
	if _, _, none := StatusIs("d.", anyhook.StatusPaused, nil); !none {
		t.Error("paused of no destination selects something")
	}
}
