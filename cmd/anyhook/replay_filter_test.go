package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
)

// `anyhook replay --filter EXPR` and `--search NAME` replay the
// deliveries of the events a CEL filter, or a saved search by its name,
// selects among those received from --since to --until, as the API's
// bulk replay by filter does: a dry run lists them and changes nothing,
// the replay marks them as replays; bad combinations, a filter that does
// not compile and an unknown search are refused naming the flag.
func TestReplayByFilterAndSearch(t *testing.T) {
	t.Parallel()
	f := newReplayFixture(t)
	big := f.sendDead(t, "evt_big", 2)
	small := f.sendDead(t, "evt_small", 2)
	hits := len(f.dest.Requests())
	const expr = `body.id.startsWith("evt_big")`

	rep := f.replayJSON(t, "--filter", expr, "--since", "1h", "--destination", "billing", "--dry-run")
	if !rep.DryRun || rep.Count != 2 || rep.MatchedEvents == nil || *rep.MatchedEvents != 2 || len(rep.Deliveries) != 2 {
		t.Fatalf("dry run = %+v; want 2 deliveries of 2 matched events", rep)
	}
	for _, d := range rep.Deliveries {
		if d.Destination != "billing" || (d.EventID != big[0] && d.EventID != big[1]) {
			t.Errorf("dry-run item %+v, want billing of %v", d, big)
		}
	}
	code, out, _ := f.replay(t, "--filter", expr, "--since", "1h", "--dry-run")
	if code != 0 || !strings.HasPrefix(out, "would replay 4 deliveries of the 2 events matched\n") {
		t.Errorf("text dry run: exit %d, %q", code, out)
	}
	if len(f.dest.Requests()) != hits {
		t.Fatal("a dry run sent something")
	}

	if code, body := gatewaytest.Admin(t, "POST", f.url+"/api/searches",
		`{"name":"big ones","query":"source=stripe&q=filter%3Abody.id.startsWith(%22evt_big%22)"}`); code != http.StatusCreated {
		t.Fatalf("saving the search: %d %s", code, body)
	}
	rep = f.replayJSON(t, "--search", "big ones", "--since", "1h", "--destination", "billing", "--yes", "--reason", "INC-7")
	if rep.DryRun || rep.Count != 2 || *rep.MatchedEvents != 2 {
		t.Fatalf("replay by search = %+v; want 2", rep)
	}
	for _, id := range append(big, small...) {
		replays := 0
		for _, d := range f.event(t, id).Deliveries {
			if d.Replay {
				replays++
				if d.Destination != "billing" {
					t.Errorf("event %s replayed to %s", id, d.Destination)
				}
			}
		}
		if want := map[bool]int{true: 1, false: 0}[strings.Contains(strings.Join(big, " "), id)]; replays != want {
			t.Errorf("event %s has %d replays, want %d", id, replays, want)
		}
	}

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--filter", expr}, 2, "--filter and --search need --since"},
		{[]string{"--filter", "body.id ==", "--since", "1h"}, 2, "--filter: invalid CEL expression"},
		{[]string{"--filter", expr, "--search", "big ones", "--since", "1h"}, 2, "give --filter or --search, not both"},
		{[]string{"--search", "big ones", "--source", "stripe", "--since", "1h"}, 2, "--search selects the events itself"},
		{[]string{"--filter", expr, "--event", big[0]}, 2, "give either --event ID"},
		{[]string{"--search", "nope", "--since", "1h"}, 1, `--search: no saved search is named "nope" (saved: big ones)`},
	} {
		code, _, errOut := f.replay(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("replay %s: exit %d, %q; want %d saying %q", strings.Join(c.args, " "), code, errOut, c.code, c.says)
		}
	}
}
