package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestKillDuringOverloadLosesNothing overloads a gateway: the test holds
// the SQLite write lock for a moment while 400 clients send (more than one
// batch, 256 events, queues behind the stalled commit), so the gateway
// sheds past its ingest.max_queue_wait; the burst goes on after the lock
// is let go, and the gateway is killed with kill -9 half way through it,
// then restarted. Some requests were shed (503 with Retry-After) and none
// of those was recorded; every accepted event is there and is delivered.
func TestKillDuringOverloadLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dest := newRecorder(t, false)
	cfg := writeConfig(t, dir, strings.Replace(gatewayConfig("sqlite:anyhook.db", dest.URL, "reclaim"),
		"sources:", "ingest: {max_queue_wait: 20ms}\nsources:", 1))
	p := start(t, cfg)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "anyhook.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	firstShed := make(chan struct{})
	go func() {
		select {
		case <-firstShed:
		case <-time.After(10 * time.Second):
		}
		lock.ExecContext(context.Background(), "ROLLBACK")
		lock.Close()
	}()
	const events, workers = 4000, 400 // more in flight than one batch (256) holds
	var mu sync.Mutex
	acked, shed := map[string]bool{}, map[string]bool{}
	next := make(chan int)
	stop := make(chan struct{})
	go func() {
		defer close(next)
		for i := range events {
			select {
			case next <- i:
			case <-stop:
				return
			}
		}
	}()
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				key := fmt.Sprintf("evt_over_%d", i)
				body, h, err := stripeEvent(key, 0)
				if err != nil {
					t.Error(err)
					return
				}
				req, _ := http.NewRequest("POST", p.url+"/webhooks/stripe", strings.NewReader(string(body)))
				req.Header = h
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					once.Do(func() { close(stop) }) // the gateway is gone
					continue
				}
				code, retry := resp.StatusCode, resp.Header.Get("Retry-After")
				var id string
				if code == 200 {
					var a struct{ ID string }
					json.NewDecoder(resp.Body).Decode(&a)
					id = a.ID
				}
				resp.Body.Close()
				mu.Lock()
				switch {
				case code == 200:
					acked[id] = true
				case code == http.StatusServiceUnavailable && retry != "":
					if len(shed) == 0 {
						close(firstShed)
					}
					shed[key] = true
				default:
					t.Errorf("%s: %d (Retry-After %q)", key, code, retry)
				}
				n := len(acked) + len(shed)
				mu.Unlock()
				if n == events/2 {
					p.cmd.Process.Signal(syscall.SIGKILL)
				}
			}
		})
	}
	wg.Wait()
	p.cmd.Process.Signal(syscall.SIGKILL) // in case the burst ended first
	<-p.done
	if len(acked)+len(shed) >= events || len(acked) == 0 || len(shed) == 0 {
		t.Fatalf("%d accepted, %d shed of %d: want the kill mid-burst, some accepted and some shed", len(acked), len(shed), events)
	}
	for key := range shed {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM events WHERE dedup_key = ?`, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s was shed (503) but recorded", key)
		}
	}
	nAcked := len(acked)
	start(t, cfg)
	dest.awaitAll(t, acked)
	t.Logf("%d accepted and %d shed before kill -9; all accepted delivered after restart", nAcked, len(shed))
}
