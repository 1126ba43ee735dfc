package bench

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/config"
)

// FillReport is what `anyhook bench --fill` measured.
type FillReport struct {
	Machine  Machine `json:"machine"`
	Database string  `json:"database"`
	Added    int     `json:"events_added"`
	// FillSeconds is how long adding them took (Ingest, claims, outcomes).
	FillSeconds float64 `json:"fill_seconds"`
	// OpenSeconds is how long opening the store took: the pending
	// migrations, which hold their locks that long.
	OpenSeconds float64 `json:"open_seconds"`
	// Events is how many events the store holds (the ledger's size):
	// fewer than Added, as the fill's duplicates are not events.
	Events int64 `json:"events"`
	// StoreBytes is the SQLite file with its WAL after the timing (0 on
	// PostgreSQL): what an operator sizing a disk compares with the docs.
	StoreBytes int64        `json:"store_bytes,omitempty"`
	Requests   []ReadTiming `json:"requests"`
	Failures   []string     `json:"failures,omitempty"`
	Repeat     int          `json:"repeat"`
}

// readGoalMS is the p95 every page and list is to stay within at ten
// million events, on either store (BENCHMARKS.md, "The read side at
// scale").
const readGoalMS = 100

// ReadTiming is one request's figures.
type ReadTiming struct {
	Name   string  `json:"name"`
	URL    string  `json:"url"`
	Status int     `json:"status"`
	ColdMS float64 `json:"cold_ms"` // the first request after the gateway started
	P50MS  float64 `json:"p50_ms"`
	P95MS  float64 `json:"p95_ms"`
}

func (r *FillReport) write(w io.Writer, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(r)
		return
	}
	fmt.Fprintf(w, "store: %s, %d events recorded (%d added, duplicates included, in %.0f s; opened and migrated in %.1f s); %d CPUs, %s\n",
		r.Database, r.Events, r.Added, r.FillSeconds, r.OpenSeconds, r.Machine.CPUs, r.Machine.CPUModel)
	if r.StoreBytes > 0 && r.Events > 0 {
		fmt.Fprintf(w, "disk: %.2f GB, file and WAL (%.2f KB per recorded event)\n", float64(r.StoreBytes)/1e9, float64(r.StoreBytes)/float64(r.Events)/1e3)
	}
	fmt.Fprintf(w, "cold: each URL's first request after the gateway started; p50, p95: of %d warm requests each", r.Repeat)
	if r.Repeat < 20 {
		// The 95th percentile of fewer than 20 is their slowest.
		fmt.Fprint(w, " (fewer than 20: p95 is the slowest)")
	}
	fmt.Fprintf(w, "\n\"%s paused:\" requests ran with destination %s paused (resumed after); URLs are the gateway's paths (dashboard ones need a session)\n", pausedDest, pausedDest)
	fmt.Fprintf(w, "%-58s %7s %9s %9s %9s  %s\n", "request", "status", "cold ms", "p50 ms", "p95 ms", "url")
	var over []string
	for _, t := range r.Requests {
		fmt.Fprintf(w, "%-58s %7d %9.1f %9.1f %9.1f  %s\n", t.Name, t.Status, t.ColdMS, t.P50MS, t.P95MS, t.URL)
		if t.P95MS > readGoalMS {
			over = append(over, fmt.Sprintf("%s (%.1f ms)", t.Name, t.P95MS))
		}
	}
	if len(r.Requests) > 0 {
		// The goal is at ten million events: a smaller store says
		// little about it.
		fmt.Fprintf(w, "goal, p95 within %d ms at ten million events; here at %d: %d of %d requests within", readGoalMS, r.Events, len(r.Requests)-len(over), len(r.Requests))
		if len(over) > 0 {
			fmt.Fprintf(w, "; over: %s", strings.Join(over, ", "))
		}
		fmt.Fprintln(w)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAIL %s\n", f)
	}
}

// fillAndTime fills the store (unless o.events is 0), then times the
// read side on it.
func fillAndTime(ctx context.Context, o *fillOptions, stderr io.Writer) (*FillReport, error) {
	say := progress{stderr}.say
	rep := &FillReport{Machine: machine(), Database: "sqlite", Added: o.events, Repeat: o.repeat}
	if strings.HasPrefix(o.database, "postgres") {
		rep.Database = "postgres"
	}
	say("opening %s (applying pending migrations), then adding %d events, %d per batch", rep.Database, o.events, o.batch)
	took, opened, err := fill(ctx, o, say)
	if err != nil {
		return nil, err
	}
	rep.FillSeconds, rep.OpenSeconds = took.Seconds(), opened.Seconds()
	dir, err := os.MkdirTemp("", "anyhook-fill-cfg")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfgPath, err := writeFillConfig(dir, o.database)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// A first run lets the gateway sequence the new events into its log
	// (as it would have while they arrived), and finds ids to ask for.
	say("sequencing the new events into the log")
	gw, err := startChild(ctx, exe, cfgPath, nil, stderr)
	if err != nil {
		return nil, err
	}
	base := "http://" + gw.addr
	rep.Events, err = waitSequenced(ctx, base)
	var sample samples
	if err == nil {
		sample, err = findSamples(ctx, base)
	}
	if serr := gw.stop(5 * time.Minute); err == nil {
		err = serr
	}
	if err != nil {
		return rep, err
	}
	say("timing %d requests, cold then %d times each warm", len(sample.urls()), o.repeat)
	gw, err = startChild(ctx, exe, cfgPath, nil, stderr)
	if err != nil {
		return rep, err
	}
	defer gw.stop(5 * time.Minute)
	base = "http://" + gw.addr
	// An interrupted earlier run may have left pausedDest paused.
	if err := adminPost(ctx, base+"/api/destinations/"+pausedDest+"/resume"); err != nil {
		return rep, err
	}
	timeAll(ctx, rep, base, sample.urls(), o.repeat)
	// The same store with one destination paused: its retrying deliveries
	// (a third of them) become a paused backlog, and the lists of the
	// statuses derived from the pause read around it.
	say("timing %d requests with %s paused", len(pausedURLs()), pausedDest)
	if err := adminPost(ctx, base+"/api/destinations/"+pausedDest+"/pause"); err != nil {
		rep.Failures = append(rep.Failures, "pause: "+err.Error())
	} else {
		timeAll(ctx, rep, base, pausedURLs(), o.repeat)
		if err := adminPost(ctx, base+"/api/destinations/"+pausedDest+"/resume"); err != nil {
			rep.Failures = append(rep.Failures, "resume: "+err.Error())
		}
	}
	if path, ok := strings.CutPrefix(o.database, "sqlite:"); ok {
		for _, f := range []string{path, path + "-wal"} {
			if fi, err := os.Stat(f); err == nil {
				rep.StoreBytes += fi.Size()
			}
		}
	}
	return rep, nil
}

// timeAll times each request of reqs cold (the first after the gateway
// started, unless an earlier pass asked it), then repeat times warm, into rep.
func timeAll(ctx context.Context, rep *FillReport, base string, reqs [][2]string, repeat int) {
	first := len(rep.Requests)
	for _, rq := range reqs {
		d, status, err := get(ctx, base+rq[1], nil)
		rt := ReadTiming{Name: rq[0], URL: rq[1], Status: status, ColdMS: ms(d)}
		if err != nil || status != http.StatusOK {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: %d %v", rq[1], status, err))
		}
		rep.Requests = append(rep.Requests, rt)
	}
	for i, rq := range reqs {
		var ds []time.Duration
		for range repeat {
			d, _, _ := get(ctx, base+rq[1], nil)
			ds = append(ds, d)
		}
		slices.Sort(ds)
		rt := &rep.Requests[first+i]
		rt.P50MS, rt.P95MS = ms(nearestRank(ds, 50)), ms(nearestRank(ds, 95))
	}
}

// nearestRank is the p-th percentile of sorted by nearest rank: the
// smallest that at least p% of them are at or under. percentile rounds
// its rank down, so of the few warm requests a fill times (--repeat 3)
// its p95 was the middle one, the p50's, and a slow request passed the
// goal; here the p95 of fewer than 20 is the slowest.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// adminPost sends an admin POST without a body and wants a 2xx.
func adminPost(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return nil
}

// get times one GET; when into is not nil, the JSON answer is decoded
// into it.
func get(ctx context.Context, u string, into any) (time.Duration, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	d := time.Since(t0)
	if err == nil && into != nil {
		err = json.Unmarshal(b, into)
	}
	return d, resp.StatusCode, err
}

// waitSequenced waits until the log's size has stopped growing for 30 s
// (the checkpointer catches up in steps, seconds apart, after a fill) and
// returns it.
func waitSequenced(ctx context.Context, base string) (int64, error) {
	var last int64 = -1
	same := 0
	for tries := 0; ; tries++ {
		var cp struct {
			Size int64 `json:"size"`
		}
		_, status, err := get(ctx, base+"/api/log/checkpoint", &cp)
		switch {
		case err != nil || status == http.StatusOK:
		case tries < 60: // no checkpoint signed yet
			cp.Size = -2
		default:
			err = fmt.Errorf("answered %d", status)
		}
		if err != nil {
			return 0, fmt.Errorf("log checkpoint: %w", err)
		}
		if cp.Size != last || last < 0 {
			same = 0
		} else if same++; same == 10 {
			return last, nil
		}
		last = cp.Size
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}

// samples are ids of the filled store to ask for.
type samples struct {
	event, dedupKey, delivery string
	deepEvents, deepDead      string // the cursors of page 1,000 (50 a page)
}

func findSamples(ctx context.Context, base string) (samples, error) {
	var s samples
	var evs struct {
		Items []struct {
			ID       string `json:"id"`
			DedupKey string `json:"dedup_key"`
		} `json:"items"`
	}
	if _, _, err := get(ctx, base+"/api/events?limit=1&cursor=", &evs); err != nil || len(evs.Items) == 0 {
		return s, fmt.Errorf("no event to ask for: %v", err)
	}
	s.event, s.dedupKey = evs.Items[0].ID, evs.Items[0].DedupKey
	var ds struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if _, _, err := get(ctx, base+"/api/deliveries?limit=1", &ds); err != nil || len(ds.Items) == 0 {
		return s, fmt.Errorf("no delivery to ask for: %v", err)
	}
	s.delivery = ds.Items[0].ID
	var err error
	if s.deepEvents, err = cursorAt(ctx, base+"/api/events?source=stripe"); err != nil {
		return s, err
	}
	s.deepDead, err = cursorAt(ctx, base+"/api/deliveries?destination=billing")
	return s, err
}

// cursorAt walks list 500 at a time to the cursor of page 1,000 of 50.
func cursorAt(ctx context.Context, list string) (string, error) {
	cursor := ""
	for range 100 {
		var page struct {
			Next string `json:"next_cursor"`
		}
		if _, status, err := get(ctx, list+"&limit=500&cursor="+url.QueryEscape(cursor), &page); err != nil || status != http.StatusOK {
			return "", fmt.Errorf("%s: %d %v", list, status, err)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	return cursor, nil
}

// urls are the requests timed: name, path.
func (s samples) urls() [][2]string {
	q := url.QueryEscape
	return [][2]string{
		{"dashboard overview", "/"},
		{"dashboard events", "/events"},
		{"dashboard events by source", "/events?source=github"},
		{"dashboard events by type", "/events?type=invoice.paid"},
		{"dashboard events, type matches none", "/events?type=nothing.here"},
		{"dashboard events dead", "/events?status=dead"},
		{"dashboard search by id", "/events?q=" + q(s.event)},
		{"dashboard search, no match", "/events?q=evt_nothing"},
		{"dashboard event", "/events/" + s.event},
		{"dashboard deliveries", "/deliveries"},
		{"dashboard deliveries dead", "/deliveries?status=dead"},
		{"dashboard deliveries by destination", "/deliveries?destination=ci"},
		{"dashboard destinations", "/destinations"},
		{"dashboard rejections", "/rejections"},
		{"dashboard sources", "/sources"},
		{"api events", "/api/events"},
		{"api events by source", "/api/events?source=github"},
		{"api events by type", "/api/events?type=invoice.paid"},
		{"api events, type matches none", "/api/events?type=nothing.here"},
		{"api events by type glob", "/api/events?type=invoice.*"},
		{"api events dead", "/api/events?status=dead"},
		{"api events pending (none new)", "/api/events?status=pending"},
		{"api events since 1h", "/api/events?since=" + q(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))},
		{"api events source+type", "/api/events?source=stripe&type=charge.succeeded"},
		{"api search by dedup key", "/api/events?q=" + q(s.dedupKey)},
		{"api search, no match", "/api/events?q=evt_nothing"},
		{"api event", "/api/events/" + s.event},
		{"api deliveries", "/api/deliveries"},
		{"api deliveries by destination", "/api/deliveries?destination=ci"},
		{"api deliveries dead", "/api/deliveries?status=dead"},
		{"api deliveries delivered", "/api/deliveries?status=delivered"},
		{"api deliveries by source", "/api/deliveries?source=shopify"},
		{"api deliveries dest+status", "/api/deliveries?destination=ledger&status=dead"},
		{"api destinations", "/api/destinations"},
		{"api rejections", "/api/rejections"},
		{"api events page 1,000 (source)", "/api/events?source=stripe&cursor=" + q(s.deepEvents)},
		{"api deliveries page 1,000 (dest)", "/api/deliveries?destination=billing&cursor=" + q(s.deepDead)},
		{"metrics", "/metrics"},
		// Filters that select few rows far from the newest, which an
		// index in the wrong order walks the whole table for: a glob
		// matching none, a source without deliveries, old time windows,
		// a search continued back.
		{"dashboard events by type glob", "/events?type=invoice.*"},
		{"api events, type glob matches none", "/api/events?type=nothing.*"},
		{"dashboard search by id prefix", "/events?q=" + q(s.event[:13])},
		{"api search, no match, 15 days back", "/api/events?q=evt_nothing&until=" + q(ago(15*24*time.Hour))},
		{"api deliveries, source without any", "/api/deliveries?source=nosuch"},
		{"api events until 29 days ago", "/api/events?until=" + q(ago(29*24*time.Hour))},
		{"api events, an hour 15 days ago", "/api/events?since=" + q(ago(15*24*time.Hour)) + "&until=" + q(ago(15*24*time.Hour-time.Hour))},
		{"api deliveries until 29 days ago", "/api/deliveries?until=" + q(ago(29*24*time.Hour))},
		// A status or a rare filter combined with another: each of these
		// walked every row of a status, a window or a destination.
		{"api events delivered until 29 days ago", "/api/events?status=delivered&until=" + q(ago(29*24*time.Hour))},
		{"api events dead, an hour 15 days ago", "/api/events?status=dead&since=" + q(ago(15*24*time.Hour)) + "&until=" + q(ago(15*24*time.Hour-time.Hour))},
		{"api search delivered, no match", "/api/events?status=delivered&q=evt_nothing"},
		{"api events delivered, source+type none", "/api/events?status=delivered&source=github&type=nothing.here"},
		{"api events type none, 31 days", "/api/events?type=nothing.here&since=" + q(ago(31*24*time.Hour))},
		{"api deliveries held, 31 days", "/api/deliveries?status=held&since=" + q(ago(31*24*time.Hour))},
		{"api deliveries held+dest until 15 days", "/api/deliveries?status=held&destination=ci&until=" + q(ago(15*24*time.Hour))},
		{"dashboard events delivered until 29 days", "/events?status=delivered&until=" + q(ago(29*24*time.Hour))},
		// A destination and a source it never received from: before
		// deliveries kept their source (0039) this walked every delivery
		// of the destination, probing each one's event.
		{"api deliveries dest+source none", "/api/deliveries?destination=billing&source=github"},
		// The parts of the stored pending deliveries (retrying, paused:
		// none here), and a status with two common filters whose
		// combination is rare.
		{"api events retrying", "/api/events?status=retrying"},
		{"api events paused (none)", "/api/events?status=paused"},
		{"api events dead, source+type", "/api/events?status=dead&source=github&type=invoice.paid"},
		{"dashboard events retrying", "/events?status=retrying"},
		// A source and a type each common but never together (the fill
		// gives each type three of the four sources), then a pair that
		// occurs but has no dead delivery: both found by a review.
		{"api events, source+type never together", "/api/events?source=generic&type=push"},
		{"dashboard events, source+type never together", "/events?source=generic&type=push"},
		{"api events dead, source+type without dead", "/api/events?status=dead&source=shopify&type=push"},
		// A status with one of the two alone (the dashboard offers each).
		{"api events dead, type", "/api/events?status=dead&type=push"},
		{"api events dead, source", "/api/events?status=dead&source=shopify"},
		{"api deliveries dead, source", "/api/deliveries?status=dead&source=shopify"},
		// Searches inside the bodies that match nothing: each reads as
		// many bodies as its budget lets it, then says how far back.
		{"api search in bodies, no match", "/api/events?body=nothing-matches-this"},
		{"api filter search, no match", "/api/events?filter=" + q(`body.id == "evt_nothing"`)},
		{"dashboard search in bodies, no match", "/events?q=" + q("body:nothing-matches-this")},
		// Found by a review at ten million events: a big pair's dead
		// (24,550), over a window too; a type's resolved of any source;
		// a short id prefix with a source; a body search of a pair,
		// continued.
		{"api events dead, big source+type", "/api/events?status=dead&source=stripe&type=invoice.paid"},
		{"api events dead, big source+type, 31 days", "/api/events?status=dead&source=stripe&type=invoice.paid&since=" + q(ago(31*24*time.Hour))},
		{"api events resolved, type, 31 days", "/api/events?status=resolved&type=customer.updated&since=" + q(ago(31*24*time.Hour))},
		{"api search by id prefix, source", "/api/events?source=github&q=" + q(s.event[:4])},
		{"api search in bodies, source+type, continued", "/api/events?body=nothing-matches-this&source=shopify&type=push&until=" + q(ago(2*time.Hour))},
	}
}

// pausedDest is the destination paused for pausedURLs: stripe never
// sends to it, github only to it.
const pausedDest = "ci"

// pausedURLs are the requests timed with pausedDest paused.
func pausedURLs() [][2]string {
	q := url.QueryEscape
	month := q(ago(31 * 24 * time.Hour))
	return [][2]string{
		{"ci paused: dashboard overview", "/"},
		{"ci paused: dashboard events paused", "/events?status=paused"},
		{"ci paused: api events paused", "/api/events?status=paused"},
		{"ci paused: api events paused, a source never to ci", "/api/events?status=paused&source=stripe"},
		{"ci paused: api events retrying", "/api/events?status=retrying"},
		{"ci paused: api events pending, 31 days", "/api/events?status=pending&since=" + month},
		{"ci paused: api deliveries paused", "/api/deliveries?status=paused"},
		{"ci paused: api deliveries retrying", "/api/deliveries?status=retrying"},
		{"ci paused: api deliveries retrying of ci (none)", "/api/deliveries?status=retrying&destination=ci"},
		{"ci paused: api deliveries paused, stripe, 31 days", "/api/deliveries?status=paused&source=stripe&since=" + month},
		// A source whose every retrying delivery is held back: none.
		{"ci paused: api events retrying, github (none)", "/api/events?status=retrying&source=github"},
		{"ci paused: api deliveries retrying, github (none)", "/api/deliveries?status=retrying&source=github"},
		{"ci paused: api deliveries retrying, github, 31 days (none)", "/api/deliveries?status=retrying&source=github&since=" + month},
	}
}

// ago is the RFC 3339 time d before now.
func ago(d time.Duration) string { return time.Now().Add(-d).UTC().Format(time.RFC3339) }

// logKeyFile is where the log's key of the store is kept between runs: next
// to a SQLite file, in the temporary directory for a PostgreSQL database.
func logKeyFile(database string) string {
	if path, ok := strings.CutPrefix(database, "sqlite:"); ok {
		abs, err := filepath.Abs(path)
		if err == nil {
			path = abs
		}
		return path + "-log.key"
	}
	sum := sha256.Sum256([]byte(database))
	return filepath.Join(os.TempDir(), fmt.Sprintf("anyhook-fill-%x-log.key", sum[:6]))
}

// writeFillConfig writes the gateway's configuration for the filled store:
// the sources and destinations fill uses, no admin token (loopback), every
// destination's URL a closed port (nothing is due while timing).
func writeFillConfig(dir, database string) (string, error) {
	var b strings.Builder
	// Retention off: pruning would run while timing.
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\ndatabase: %q\nlog:\n  retention: 0s\n  checkpoint_interval: 1s\n  key_file: %q\nsources:\n",
		database, logKeyFile(database))
	for _, s := range fillSources {
		fmt.Fprintf(&b, "  %s:\n    provider: generic\n    signature: none\n    id: json:id\n", s)
	}
	b.WriteString("destinations:\n")
	for _, d := range fillDests {
		var from []string
		for _, s := range fillSources {
			if slices.Contains(fillRoutes[s], d) {
				from = append(from, s)
			}
		}
		fmt.Fprintf(&b, "  %s:\n    url: http://127.0.0.1:9/%s\n    sources: [%s]\n", d, d, strings.Join(from, ", "))
	}
	path := filepath.Join(dir, "anyhook.yaml")
	if _, err := config.Parse(path, []byte(b.String()), func(string) (string, bool) { return "", false }); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}
