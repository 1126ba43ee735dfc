package sqlite

import (
	"context"
	"sync"
	"time"
)

// The WAL is copied into the database file off the commit path: a WAL
// copy is what SQLite calls a checkpoint (not to be confused with the
// log's signed checkpoints, internal/ledger). By default SQLite copies in
// the connection whose commit took the WAL past wal_autocheckpoint pages
// (1,000), inside that commit: under load every few hundred events one
// ingest commit also copies ~4 MiB into the database file and syncs it,
// and every request of its batch waits for that. Here a goroutine on a
// reader connection runs PASSIVE copies (they never block the writer nor
// wait for readers) at most every walCopyEvery while there are commits to
// copy, and the writer's own automatic copy stays at autoCopyPages. Under
// steady writes that one is what rewinds the WAL (SQLite starts it over
// only when a write begins with every frame copied, and commits land
// while a background copy runs): the WAL grows to autoCopyPages, and the
// commit that crosses them copies only what the background copy has not.
const (
	walCopyEvery  = 100 * time.Millisecond
	autoCopyPages = 8192 // wal_autocheckpoint: 32 MiB of WAL at 4 KiB pages
)

// walCopier copies the WAL into the database file in the background.
type walCopier struct {
	wrote chan struct{} // holds a signal when a commit is not yet copied
	stop  chan struct{}
	once  sync.Once // closes stop: Close may be called again
	done  sync.WaitGroup
}

// startWALCopier starts s's background WAL copies; Close stops them.
func (s *Store) startWALCopier() {
	c := &walCopier{wrote: make(chan struct{}, 1), stop: make(chan struct{})}
	s.wal = c
	c.done.Go(func() {
		for {
			select {
			case <-c.wrote:
			case <-c.stop:
				return
			}
			s.copyWAL()
			select {
			case <-time.After(walCopyEvery):
			case <-c.stop:
				return
			}
		}
	})
}

// committed tells the copier that a commit added to the WAL.
func (c *walCopier) committed() {
	if c == nil {
		return
	}
	select {
	case c.wrote <- struct{}{}:
	default:
	}
}

func (c *walCopier) close() {
	if c == nil {
		return
	}
	c.once.Do(func() { close(c.stop) })
	c.done.Wait()
}

// copyWAL runs one PASSIVE copy (PRAGMA wal_checkpoint). A failure is
// left for the next one (or the writer's automatic one): it loses
// nothing, the WAL holds every commit until it is copied.
func (s *Store) copyWAL() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var busy, frames, copied int64
	s.r.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
}
