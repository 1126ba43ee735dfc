package main

import (
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// `anyhook replay --status dead` run twice sends each dead event once: the
// first run takes the dead deliveries out of the dead queue (resolved,
// replayed by the new delivery), so the second finds none. The event's
// actions say the CLI did it, when, and --reason.
func TestReplayStatusDeadTwiceDeliversOnce(t *testing.T) {
	t.Parallel()
	f := newReplayFixture(t)
	ids := f.sendDead(t, "evt_twice", 2)
	// billing (which still answers 500) is paused, so that its replays
	// wait instead of going dead in their turn before the second run
	// (--yes: into a paused destination on purpose).
	f.post(t, "/api/destinations/billing/pause")
	if rep := f.replayJSON(t, "--status", "dead", "--destination", "billing", "--reason", "billing was down (INC-9)", "--yes"); rep.Count != 2 {
		t.Fatalf("first replay = %+v, want 2", rep)
	}
	if rep := f.replayJSON(t, "--status", "dead", "--destination", "billing", "--reason", "again"); rep.Count != 0 {
		t.Fatalf("second replay = %+v, want 0: the first took them out of the dead queue", rep)
	}
	for _, id := range ids {
		var ev struct {
			Deliveries []struct {
				ID, Destination, Status string
				Replay                  bool
				Resolution              *struct {
					Kind, By, Reason string
					ReplayDeliveryID string `json:"replay_delivery_id"`
				} `json:"resolution"`
			}
			Actions []struct {
				Action, Actor, Reason, Destination string
				DeliveryID                         string `json:"delivery_id"`
			}
		}
		gatewaytest.AdminJSON(t, f.url+"/api/events/"+id, &ev)
		replays := 0
		var replayID string
		for _, d := range ev.Deliveries {
			if d.Replay && d.Destination == "billing" {
				replays++
				replayID = d.ID
			}
		}
		if replays != 1 {
			t.Errorf("event %s has %d billing replays, want 1", id, replays)
		}
		for _, d := range ev.Deliveries {
			if !d.Replay && d.Destination == "billing" && (d.Status != "resolved" || d.Resolution == nil || d.Resolution.Kind != "replayed" ||
				d.Resolution.By != "cli" || d.Resolution.Reason != "billing was down (INC-9)" || d.Resolution.ReplayDeliveryID != replayID) {
				t.Errorf("event %s: the dead billing delivery after the replay: %+v %+v", id, d, d.Resolution)
			}
			if !d.Replay && d.Destination == "crm" && d.Status != "dead" {
				t.Errorf("event %s: crm (not replayed) is %s, want dead", id, d.Status)
			}
		}
		if len(ev.Actions) != 1 || ev.Actions[0].Action != "replay" || ev.Actions[0].Actor != "cli" ||
			ev.Actions[0].Reason != "billing was down (INC-9)" || ev.Actions[0].DeliveryID != replayID {
			t.Errorf("event %s actions %+v", id, ev.Actions)
		}
	}
	// A reason that is not one line of UTF-8 is refused before anything
	// happens (PostgreSQL's text would refuse what SQLite keeps).
	if code, _, errOut := f.replay(t, "--status", "dead", "--reason", "two\nlines"); code != 2 || !strings.Contains(errOut, "--reason") {
		t.Errorf("--reason with a newline: exit %d, %q", code, errOut)
	}
	if code, _, errOut := f.replay(t, "--status", "dead", "--reason", "caf\xe9"); code != 2 || !strings.Contains(errOut, "UTF-8") {
		t.Errorf("--reason in Latin-1: exit %d, %q", code, errOut)
	}
	if code, _, errOut := f.replay(t, "--event", "evt_\xff"); code != 2 || !strings.Contains(errOut, "--event is not valid UTF-8") {
		t.Errorf("--event in Latin-1: exit %d, %q", code, errOut)
	}
	// Resumed, the replays fail (billing still answers 500) and go dead
	// in their turn: new dead deliveries, which a replay would send.
	f.post(t, "/api/destinations/billing/resume")
	testwait.For(t, "the replay deliveries to go dead", func() bool {
		rep := f.replayJSON(t, "--status", "dead", "--destination", "billing", "--dry-run")
		return rep.Count == 2
	})
}

// post POSTs to the gateway's admin API and wants 200.
func (f *replayFixture) post(t *testing.T, path string) {
	t.Helper()
	if code, b := gatewaytest.Admin(t, "POST", f.url+path, ""); code != 200 {
		t.Fatalf("POST %s: %d %s", path, code, b)
	}
}
