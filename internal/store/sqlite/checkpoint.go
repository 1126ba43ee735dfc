package sqlite

import (
	"context"
	"sync"
	"time"
)

// WAL checkpoints run off the commit path. By default SQLite checkpoints
// in the connection whose commit took the WAL past wal_autocheckpoint
// pages (1,000), inside that commit: under load every few hundred events
// one ingest commit also copies ~4 MiB into the database file and syncs
// it, and every request of its batch waits for that. Here a goroutine on
// a reader connection runs PASSIVE checkpoints (they never block the
// writer nor wait for readers) at most every checkpointEvery while there
// are commits to copy, and the writer's own automatic checkpoint stays at
// autoCheckpointPages. Under steady writes that one is what rewinds the
// WAL (SQLite starts it over only when a write begins with every frame
// copied, and commits land while a background checkpoint runs): the WAL
// grows to autoCheckpointPages, and the commit that crosses them copies
// only what the background checkpoint has not.
const (
	checkpointEvery     = 100 * time.Millisecond
	autoCheckpointPages = 8192 // 32 MiB of WAL at 4 KiB pages
)

// checkpointer copies the WAL into the database file in the background.
type checkpointer struct {
	wrote chan struct{} // holds a signal when a commit is not yet copied
	stop  chan struct{}
	once  sync.Once // closes stop: Close may be called again
	done  sync.WaitGroup
}

// startCheckpointer starts s's background checkpoints; Close stops them.
func (s *Store) startCheckpointer() {
	c := &checkpointer{wrote: make(chan struct{}, 1), stop: make(chan struct{})}
	s.cp = c
	c.done.Go(func() {
		for {
			select {
			case <-c.wrote:
			case <-c.stop:
				return
			}
			s.checkpoint()
			select {
			case <-time.After(checkpointEvery):
			case <-c.stop:
				return
			}
		}
	})
}

// committed tells the checkpointer that a commit added to the WAL.
func (c *checkpointer) committed() {
	if c == nil {
		return
	}
	select {
	case c.wrote <- struct{}{}:
	default:
	}
}

func (c *checkpointer) close() {
	if c == nil {
		return
	}
	c.once.Do(func() { close(c.stop) })
	c.done.Wait()
}

// checkpoint runs one PASSIVE checkpoint. A failure is left for the next
// one (or the writer's automatic one): it loses nothing, the WAL holds
// every commit until it is copied.
func (s *Store) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var busy, frames, copied int64
	s.r.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
}
