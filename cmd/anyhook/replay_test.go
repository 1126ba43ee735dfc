package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// sendTo posts a Stripe event with id to source of the gateway at url and
// returns the AnyHook event id.
func sendTo(t *testing.T, url, source, id string) string {
	t.Helper()
	body, h, err := stripeEvent(id, 0)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", url+"/webhooks/"+source, bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&a)
	if resp.StatusCode != 200 || a.ID == "" {
		t.Fatalf("POST /webhooks/%s %s: %d", source, id, resp.StatusCode)
	}
	return a.ID
}

type apiEvent struct {
	ID         string
	Deliveries []struct {
		ID, Destination, Status string
		Replay                  bool
	}
}

// replayFixture is a gateway with two Stripe sources and a destination
// that always fails, so that every delivery goes dead at once.
type replayFixture struct {
	cfg, url string
	dest     *sinktest.Sink // the destination, failing every request
}

func newReplayFixture(t *testing.T) *replayFixture {
	return replayFixtureWith(t, `
sources:
  stripe: {provider: stripe, secrets: [%[1]s]}
  stripe_eu: {provider: stripe, secrets: [%[1]s]}
destinations:
  billing: {url: %[2]s, sources: [stripe, stripe_eu], max_attempts: 1}
  crm: {url: %[2]s, sources: [stripe], max_attempts: 1}
`)
}

// replayFixtureWith is newReplayFixture with the sources and destinations
// of routes, where %[1]s stands for the Stripe secret and %[2]s for the
// failing destination's URL.
func replayFixtureWith(t *testing.T, routes string) *replayFixture {
	dest := sinktest.Start(t, sinktest.Options{Answer: func(*http.Request, []byte) int { return http.StatusInternalServerError }})
	cfg := writeConfig(t, t.TempDir(), `listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s}`+fmt.Sprintf(routes, secret, dest.URL))
	p := start(t, cfg)
	return &replayFixture{cfg: cfg, url: p.url, dest: dest}
}

// sendDead sends n events to the source stripe, with ids prefix_0,
// prefix_1, …, and waits until every delivery of each is dead. It returns
// their AnyHook ids.
func (f *replayFixture) sendDead(t *testing.T, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, sendTo(t, f.url, "stripe", fmt.Sprintf("%s_%d", prefix, i)))
	}
	for _, id := range ids {
		f.waitDead(t, id)
	}
	return ids
}

func (f *replayFixture) event(t *testing.T, id string) apiEvent {
	t.Helper()
	var ev apiEvent
	gatewaytest.AdminJSON(t, f.url+"/api/events/"+id, &ev)
	return ev
}

// waitDead waits until every delivery of event id is dead.
func (f *replayFixture) waitDead(t *testing.T, id string) apiEvent {
	t.Helper()
	return testwait.Value(t, "every delivery of event "+id+" dead", func() (apiEvent, error) {
		ev := f.event(t, id)
		for _, d := range ev.Deliveries {
			if d.Status != "dead" {
				return ev, fmt.Errorf("deliveries %+v", ev.Deliveries)
			}
		}
		return ev, nil
	})
}

func (f *replayFixture) replay(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return exe(t, append([]string{"replay", "--config", f.cfg}, args...)...)
}

func (f *replayFixture) replayJSON(t *testing.T, args ...string) replayReport {
	t.Helper()
	code, out, errOut := f.replay(t, append(args, "--json")...)
	var rep replayReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("replay %s --json: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
	}
	return rep
}

// `anyhook replay --event` takes whichever id a person has: the AnyHook
// event id, a delivery id or the provider's event id; a provider id that
// two sources share is refused with the matches and the --source that
// tells them apart.
func TestReplayAcceptsAnyID(t *testing.T) {
	t.Parallel()
	f := newReplayFixture(t)
	only := sendTo(t, f.url, "stripe", "evt_only_here")
	shared := sendTo(t, f.url, "stripe", "evt_shared")
	sharedEU := sendTo(t, f.url, "stripe_eu", "evt_shared")
	ev := f.waitDead(t, only)
	f.waitDead(t, shared)
	f.waitDead(t, sharedEU)

	// The AnyHook event id, in a dry run: nothing changes.
	rep := f.replayJSON(t, "--event", only, "--dry-run")
	if !rep.DryRun || rep.Matched != "event_id" || rep.EventID != only || rep.Source != "stripe" || rep.ProviderEventID != "evt_only_here" || rep.Count != 2 {
		t.Errorf("dry run by event id = %+v", rep)
	}
	if got := f.event(t, only); len(got.Deliveries) != 2 {
		t.Fatalf("a dry run created deliveries: %+v", got.Deliveries)
	}

	// A delivery id: that delivery's event, to that delivery's destination.
	var crm string
	for _, d := range ev.Deliveries {
		if d.Destination == "crm" {
			crm = d.ID
		}
	}
	rep = f.replayJSON(t, "--event", crm)
	if rep.Matched != "delivery_id" || rep.EventID != only || rep.Count != 1 || rep.Deliveries[0].Destination != "crm" || rep.Deliveries[0].DeliveryID == "" {
		t.Errorf("replay by delivery id = %+v, want one delivery of %s to crm", rep, only)
	}

	// The provider's event id, unique: resolved through the store.
	rep = f.replayJSON(t, "--event", "evt_only_here", "--destination", "billing")
	if rep.Matched != "provider_event_id" || rep.EventID != only || rep.Count != 1 || rep.Deliveries[0].Destination != "billing" {
		t.Errorf("replay by provider event id = %+v", rep)
	}
	if got := f.event(t, only); len(got.Deliveries) != 4 {
		t.Errorf("after two replays the event has %d deliveries, want 4", len(got.Deliveries))
	}

	// The provider's event id in two sources: a clear error.
	code, out, errOut := f.replay(t, "--event", "evt_shared")
	if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 ||
		!strings.Contains(errOut, `provider event id "evt_shared" matches 2 events`) ||
		!strings.Contains(errOut, shared+" in source stripe") || !strings.Contains(errOut, sharedEU+" in source stripe_eu") ||
		!strings.Contains(errOut, "--source stripe") || !strings.Contains(errOut, "--source stripe_eu") {
		t.Errorf("ambiguous provider id: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	rep = f.replayJSON(t, "--event", "evt_shared", "--source", "stripe_eu")
	if rep.EventID != sharedEU || rep.Source != "stripe_eu" || rep.Count != 1 {
		t.Errorf("--source stripe_eu = %+v, want %s", rep, sharedEU)
	}
	if code, _, errOut := f.replay(t, "--event", shared, "--source", "stripe_eu"); code != 2 || !strings.Contains(errOut, `from source "stripe", not --source "stripe_eu"`) {
		t.Errorf("an event id with another --source: exit %d, %q", code, errOut)
	}

	// Text output names the event and its provider id.
	code, out, _ = f.replay(t, "--event", "evt_only_here", "--dry-run")
	if code != 0 || !strings.Contains(out, "would replay event "+only+" (source stripe, provider event id evt_only_here) to billing, crm: 2 deliveries") ||
		!strings.Contains(out, "dry run: nothing was changed") {
		t.Errorf("replay --dry-run: exit %d, %q", code, out)
	}
	if code, _, errOut := f.replay(t, "--event", "evt_nowhere"); code != 1 || !strings.Contains(errOut, `no event has "evt_nowhere"`) {
		t.Errorf("unknown id: exit %d, %q; want 1", code, errOut)
	}
}

// `anyhook replay --status` takes --since and --until, --dry-run lists
// what it would replay without changing anything, and --json reports it.
func TestReplayStatusDryRunUntilJSON(t *testing.T) {
	t.Parallel()
	f := newReplayFixture(t)
	ids := f.sendDead(t, "evt_bulk", 3)
	hits := len(f.dest.Requests())

	rep := f.replayJSON(t, "--status", "dead", "--dry-run")
	if !rep.DryRun || rep.Count != 6 || len(rep.Deliveries) != 6 {
		t.Fatalf("dry run = %+v, want 6 (3 events × billing, crm)", rep)
	}
	for _, d := range rep.Deliveries {
		if d.DeliveryID != "" || (d.Destination != "billing" && d.Destination != "crm") {
			t.Errorf("dry-run item %+v", d)
		}
	}
	if rep := f.replayJSON(t, "--status", "dead", "--dry-run", "--destination", "crm"); rep.Count != 3 {
		t.Errorf("--destination crm: %d, want 3", rep.Count)
	}
	// --until before the deliveries were created selects none; a window
	// around them selects all.
	if rep := f.replayJSON(t, "--status", "dead", "--dry-run", "--until", "1h"); rep.Count != 0 {
		t.Errorf("--until 1h (an hour ago): %d, want 0", rep.Count)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if rep := f.replayJSON(t, "--status", "dead", "--dry-run", "--since", "1h", "--until", future); rep.Count != 6 {
		t.Errorf("--since 1h --until %s: %d, want 6", future, rep.Count)
	}
	code, out, _ := f.replay(t, "--status", "dead", "--dry-run")
	if code != 0 || !strings.HasPrefix(out, "would replay 6 deliveries\n  event ") || !strings.Contains(out, "dry run: nothing was changed") {
		t.Errorf("text dry run: exit %d, %q", code, out)
	}
	for _, id := range ids {
		if got := f.event(t, id); len(got.Deliveries) != 2 {
			t.Fatalf("dry runs created deliveries for %s: %+v", id, got.Deliveries)
		}
	}
	if len(f.dest.Requests()) != hits {
		t.Fatal("a dry run sent something")
	}
	if code, _, errOut := f.replay(t, "--status", "dead", "--since", "1h", "--until", "2h"); code != 2 || !strings.Contains(errOut, "--since must be before --until") {
		t.Errorf("since after until: exit %d, %q", code, errOut)
	}
	if code, _, errOut := f.replay(t, "--event", ids[0], "--until", "1h"); code != 2 || !strings.Contains(errOut, "go with --status") {
		t.Errorf("--until with --event: exit %d, %q", code, errOut)
	}

	rep = f.replayJSON(t, "--status", "dead", "--destination", "billing", "--yes") // billing still fails
	if rep.DryRun || rep.Count != 3 {
		t.Fatalf("replay = %+v, want 3", rep)
	}
	for _, id := range ids {
		replays := 0
		for _, d := range f.event(t, id).Deliveries {
			if d.Replay && d.Destination == "billing" {
				replays++
			}
		}
		if replays != 1 {
			t.Errorf("event %s has %d billing replays, want 1", id, replays)
		}
	}
}

// A replay of an event without --destination respects the destinations'
// filters unless --ignore-filters; a named destination is replayed to
// whatever its filter says.
func TestReplayRespectsFilters(t *testing.T) {
	t.Parallel()
	f := replayFixtureWith(t, `
sources:
  stripe: {provider: stripe, secrets: [%[1]s]}
destinations:
  billing: {url: %[2]s, sources: [stripe], max_attempts: 1}
  crm: {url: %[2]s, sources: [stripe], max_attempts: 1, filter: 'type.startsWith("customer.")'}
`)
	id := sendTo(t, f.url, "stripe", "evt_filtered")
	dests := func(rep replayReport) string {
		var ds []string
		for _, d := range rep.Deliveries {
			ds = append(ds, d.Destination)
		}
		return strings.Join(ds, ",") + " filtered:" + strings.Join(rep.Filtered, ",")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--event", id, "--dry-run"}, "billing filtered:crm"},
		{[]string{"--event", id, "--dry-run", "--ignore-filters"}, "billing,crm filtered:"},
		{[]string{"--event", id, "--dry-run", "--destination", "crm"}, "crm filtered:"},
		{[]string{"--event", id}, "billing filtered:crm"},
	} {
		if got := dests(f.replayJSON(t, tc.args...)); got != tc.want {
			t.Errorf("replay %s: %s, want %s", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	code, out, _ := f.replay(t, "--event", id, "--dry-run")
	if code != 0 || !strings.Contains(out, "not to crm: its filter does not accept the event") {
		t.Errorf("replay output: %d %q", code, out)
	}
}

// A command other than serve that upgrades the store says so on stderr,
// as serve does: on a big store the migrations hold it for minutes, and
// it would otherwise sit silent. A new store's schema is made quietly.
// The commands that only read (replay --dry-run, log verify) refuse a
// store the binary would upgrade, and leave it as it was.
func TestCommandSaysTheUpgrade(t *testing.T) {
	dir := t.TempDir()
	body := `database: sqlite:anyhook.db
sources:
  stripe: {provider: stripe, secrets: [whsec_x]}
destinations:
  billing: {url: "http://127.0.0.1:9/", sources: [stripe]}
`
	cfg := writeConfig(t, dir, body)
	replay := func() string {
		t.Helper()
		code, out, errOut := exe(t, "replay", "--config", cfg, "--event", "evt_none")
		if code != 1 || out != "" || !strings.Contains(errOut, "evt_none") {
			t.Fatalf("replay of an unknown event: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		return errOut
	}
	if errOut := replay(); strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "database") {
		t.Errorf("a new store: stderr %q, want the error alone", errOut)
	}

	if code, _, errOut := exe(t, "log", "key", "--config", cfg); code != 0 { // the key log verify needs
		t.Fatalf("log key: exit %d, stderr %q", code, errOut)
	}

	// The store as the binary before 0062 left it (0062 only drops an
	// index, so applying it again is what an upgrade does).
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "anyhook.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version = 62`); err != nil {
		t.Fatal(err)
	}
	// A command that only reads refuses it, and leaves it as it was.
	for _, args := range [][]string{
		{"replay", "--config", cfg, "--event", "evt_none", "--dry-run"},
		{"log", "verify", "--config", cfg},
	} {
		code, out, errOut := exe(t, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "database schema is older than this binary") ||
			!strings.Contains(errOut, "0062_events_dedup_key.sql") || strings.Contains(errOut, "database upgrade") {
			t.Errorf("%s on a store one migration behind: exit %d, stdout %q, stderr %q; want exit 2 refusing it",
				strings.Join(args[:2], " "), code, out, errOut)
		}
	}
	// Nor do they make a store at a mistyped path and report on it.
	typo := writeConfig(t, t.TempDir(), strings.Replace(body, "sqlite:anyhook.db", "sqlite:anyhok.db", 1))
	if code, _, errOut := exe(t, "log", "key", "--config", typo); code != 0 {
		t.Fatalf("log key: exit %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{
		{"replay", "--config", typo, "--event", "evt_none", "--dry-run"},
		{"log", "verify", "--config", typo},
	} {
		code, out, errOut := exe(t, args...)
		if _, err := os.Stat(filepath.Join(filepath.Dir(typo), "anyhok.db")); code != 2 || out != "" ||
			!strings.Contains(errOut, "anyhok.db: the database holds no AnyHook store") || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s at a path with no store: exit %d, stdout %q, stderr %q, file %v; want exit 2 and no file",
				strings.Join(args[:2], " "), code, out, errOut, err)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM schema_migrations WHERE version = 62`).Scan(&n); err != nil || n != 0 {
		t.Errorf("after the commands that only read: migration 62 recorded %d times (%v), want 0", n, err)
	}
	db.Close()
	errOut := replay()
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "database upgrade: applying migrations") ||
		!strings.Contains(lines[0], "migrations=1") || !strings.Contains(lines[0], "last=0062_events_dedup_key.sql") ||
		!strings.Contains(lines[1], "database upgrade: migrations applied") || strings.Contains(lines[0], "time=") {
		t.Errorf("an upgrade: stderr\n%s\nwant the upgrade's two lines, then the error", errOut)
	}
	if errOut := replay(); strings.Contains(errOut, "database") {
		t.Errorf("after the upgrade: stderr %q", errOut)
	}
}
