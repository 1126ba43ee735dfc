package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// dbServer is the PostgreSQL server of a run when it runs on this host
// where /proc shows it: what its processes spend (every backend of every
// client, and its own helpers: WAL writer, checkpointer, autovacuum) is
// the database's share of an event, next to the gateway's (the two
// compete for the same CPUs).
type dbServer struct{ postmaster int }

// findServer finds the server behind dsn: the process that serves a
// connection of ours, known by its title naming our end of the
// connection, and its parent, the postmaster. A server elsewhere (another
// host, a container's process namespace) is not found.
func findServer(ctx context.Context, dsn string) (*dbServer, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return nil, err
	}
	ours, ok := conn.PgConn().Conn().LocalAddr().(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("not over TCP: its backend cannot be told apart")
	}
	title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.HasPrefix(title, []byte("postgres: ")) || !bytes.Contains(title, fmt.Appendf(nil, "(%d)", ours.Port)) {
		return nil, fmt.Errorf("backend %d is not a process of this host that serves port %d", pid, ours.Port)
	}
	st, err := procStat(pid)
	if err != nil {
		return nil, err
	}
	return &dbServer{postmaster: st.ppid}, nil
}

// cpuUse is what the server's processes had run at one moment: the
// postmaster itself, each live child, and the children the postmaster
// reaped (counted by the kernel in ticks).
type cpuUse struct {
	self, reaped time.Duration
	children     map[int]time.Duration
}

// cpu reads what the server's processes have run so far.
func (s *dbServer) cpu() (cpuUse, error) {
	pm, err := procStat(s.postmaster)
	if err != nil {
		return cpuUse{}, err
	}
	u := cpuUse{self: onCPU(s.postmaster, pm), reaped: ticks(pm.cutime + pm.cstime), children: map[int]time.Duration{}}
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return cpuUse{}, err
	}
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, err := procStat(pid); err == nil && c.ppid == s.postmaster {
			u.children[pid] = onCPU(pid, c)
		}
	}
	return u, nil
}

// since is what the server ran between b and u: each live child's growth
// (all of it for a child started since), the postmaster's own, and the
// reaped children's count's growth less what those that were live at b
// had run by then. A reaped child's count is in ticks and its earlier one
// in nanoseconds, so that last part can come out below zero by a tick a
// child: it counts as zero.
func (u cpuUse) since(b cpuUse) time.Duration {
	d := u.self - b.self
	for pid, t := range u.children {
		d += t - b.children[pid]
	}
	reaped := u.reaped - b.reaped
	for pid, t := range b.children {
		if _, live := u.children[pid]; !live {
			reaped -= t
		}
	}
	return d + max(reaped, 0)
}

// onCPU is how long a live process has run: /proc/PID/schedstat's first
// field, in nanoseconds, else its user and system time from stat, in
// ticks of 10 ms (too coarse for a short run, when a backend's share of it
// is a few milliseconds).
func onCPU(pid int, st stat) time.Duration {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil {
		if f := bytes.Fields(b); len(f) > 0 {
			if ns, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
				return time.Duration(ns)
			}
		}
	}
	return ticks(st.utime + st.stime)
}

// ticks is a count of /proc's clock ticks (USER_HZ: 100 a second on
// Linux) as a duration.
func ticks(n int64) time.Duration { return time.Duration(n) * (time.Second / 100) }

type stat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads the fields of /proc/PID/stat this file needs (proc(5)).
func procStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	// The command, field 2, is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3
	if len(f) < 15 {
		return stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	n := func(field int) int64 {
		v, _ := strconv.ParseInt(string(f[field-3]), 10, 64)
		return v
	}
	return stat{ppid: int(n(4)), utime: n(14), stime: n(15), cutime: n(16), cstime: n(17)}, nil
}
