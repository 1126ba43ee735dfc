package bench

import (
	"os"
	"testing"

	"github.com/anyhook/anyhook/internal/pgtest"
)

// TestFindServer: the server of the tests' DSN runs on this host; its
// processes have run for some time, and a query adds to it.
func TestFindServer(t *testing.T) {
	if st, err := procStat(os.Getpid()); err != nil || st.ppid != os.Getppid() {
		t.Fatalf("procStat(self) = %+v, %v; want parent %d", st, err, os.Getppid())
	}
	dsn := pgtest.DSN(t)
	db, err := findServer(t.Context(), dsn)
	if err != nil {
		t.Skipf("the server is not a process of this host: %v", err)
	}
	before, err := db.cpu()
	if err != nil || before <= 0 {
		t.Fatalf("cpu() = %v, %v; want the time the server has run", before, err)
	}
	// Work for the server: a second lookup connects, queries and ends.
	if _, err := findServer(t.Context(), dsn); err != nil {
		t.Fatal(err)
	}
	if after, err := db.cpu(); err != nil || after <= before {
		t.Fatalf("cpu() after a connection and a query = %v (%v), want more than %v", after, err, before)
	}
}
