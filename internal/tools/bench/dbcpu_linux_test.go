package bench

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// TestFindServer: the server of the tests' DSN runs on this host; its CPU
// counts each of its live backends, and a backend's count grows with the
// work it does.
func TestFindServer(t *testing.T) {
	if st, err := procStat(os.Getpid()); err != nil || st.ppid != os.Getppid() {
		t.Fatalf("procStat(self) = %+v, %v; want parent %d", st, err, os.Getppid())
	}
	dsn := pgtest.DSN(t)
	db, err := findServer(t.Context(), dsn)
	if err != nil {
		t.Skipf("the server is not a process of this host: %v", err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var pid int
	if err := conn.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	backend := func() stat {
		st, err := procStat(pid)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := backend(); st.ppid != db.postmaster {
		t.Fatalf("backend %d has parent %d, want the postmaster found, %d", pid, st.ppid, db.postmaster)
	}
	before, err := db.cpu()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before.children[pid]; !ok {
		t.Fatalf("cpu() counted children %v, not our backend %d", before.children, pid)
	}
	var n int64
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM generate_series(1, 200000)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	after, err := db.cpu()
	if err != nil {
		t.Fatal(err)
	}
	// The query ran on the backend: the server ran at least what the
	// backend did, whatever its other processes did (counted precisely
	// where /proc has schedstat).
	grew := after.children[pid] - before.children[pid]
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil && grew <= 0 {
		t.Fatalf("the backend's run time grew by %v over a query", grew)
	}
	if d := after.since(before); d < grew {
		t.Fatalf("the server ran %v between the two readings, less than its backend's %v", d, grew)
	}
}

// TestCPUUseSince: a child that ran between two readings counts what it
// ran; one started since counts whole; one reaped since counts what the
// postmaster's count of reaped children grew beyond what it had run at
// the first reading, and never below zero.
func TestCPUUseSince(t *testing.T) {
	ms := time.Millisecond
	b := cpuUse{self: 5 * ms, reaped: 100 * ms, children: map[int]time.Duration{1: 10 * ms, 2: 20 * ms, 3: 33 * ms}}
	u := cpuUse{self: 6 * ms, reaped: 140 * ms, children: map[int]time.Duration{1: 15 * ms, 4: 7 * ms}}
	// self 1, child 1: 5, child 4 (new): 7, reaped 40 less children 2 and
	// 3's 53 before: below zero, 0.
	if got, want := u.since(b), 13*ms; got != want {
		t.Errorf("since = %v, want %v", got, want)
	}
	u.reaped = 170 * ms // 70 less 53: 17 ran after the first reading
	if got, want := u.since(b), 30*ms; got != want {
		t.Errorf("since = %v, want %v", got, want)
	}
}
