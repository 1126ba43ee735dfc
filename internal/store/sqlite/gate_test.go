package sqlite

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// An ingest waiting for the writer goes before every other waiter, even
// those that came first; the others keep their order; and a waiter whose
// context ends leaves the queue without taking anyone's turn.
func TestWriteGateIngestFirst(t *testing.T) {
	var g writeGate
	waitFor := func(n int) { // until n are queued: the order of arrival is then known
		for {
			g.mu.Lock()
			got := len(g.first) + len(g.rest)
			g.mu.Unlock()
			if got == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := g.enter(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	enter := func(name string, first bool) {
		wg.Go(func() {
			if err := g.enter(context.Background(), first); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			g.leave()
		})
	}
	enter("rest1", false)
	waitFor(1)
	enter("rest2", false)
	waitFor(2)
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	go func() { gone <- g.enter(ctx, true) }()
	waitFor(3)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("an enter whose context ended took a turn")
	}
	enter("ingest", true)
	waitFor(3)
	g.leave()
	wg.Wait()
	if want := []string{"ingest", "rest1", "rest2"}; !slices.Equal(order, want) {
		t.Fatalf("turns in order %v, want %v", order, want)
	}
	g.mu.Lock()
	busy := g.busy
	g.mu.Unlock()
	if busy {
		t.Fatal("the gate is still busy after every turn ended")
	}
}
