package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// report is the soak's outcome.
type report struct {
	engine   string
	gateways int
	duration time.Duration
	took     time.Duration

	events, sends, failures, dupsSent, reordered int64
	rejected                                     int64
	faults                                       map[string]int

	delivered map[string]int // per destination: events received
	held      int            // hold-destination deliveries held after a crash
	skipped   int            // stale events legitimately skipped
	requests  map[string]int // per destination: requests received
	refused   map[string]int // per destination: answered 500 or hung on purpose

	lost          int
	lostExamples  []string
	explained     int // duplicates explained by a reclaim ("outcome unknown")
	late          int // duplicates after a 2xx that reached the gateway after its timeout
	unexplained   int
	unexplainedEx []string

	// Seen by the destinations as the requests came (deliverytest.InFlight).
	overlapDelivery, overlapObject, inversions int
	inFlightEx                                 []string
	released                                   int64 // claims released unsent (anyhook_releases_total)

	answers                            answerReport
	bursts, burstEvents, burstRequests int64
	deadlocks                          int64 // PostgreSQL: pg_stat_database.deadlocks during the soak
	deadlocksRead                      bool

	logVerify   string
	logVerifyOK bool
}

func (r *report) ok() bool {
	return r.lost == 0 && r.unexplained == 0 && r.rejected == 0 && r.logVerifyOK &&
		r.overlapDelivery+r.overlapObject+r.inversions == 0 && !r.answers.failed() && r.deadlocks == 0
}

func (r *report) print(w io.Writer) {
	total := 0
	kinds := make([]string, 0, len(r.faults))
	for k, n := range r.faults {
		total += n
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "\nsoak summary: %s of load on %s with %d gateway process(es); %s in all\n", r.duration, r.engine, r.gateways, r.took.Round(time.Second))
	fmt.Fprintf(w, "events: %d acknowledged (%d requests sent, %d retried after no answer/5xx/429, %d duplicates sent, %d sent out of order, %d rejected 4xx)\n",
		r.events, r.sends, r.failures, r.dupsSent, r.reordered, r.rejected)
	fmt.Fprintf(w, "faults injected: %d (%s)\n", total, strings.Join(kinds, ", "))
	for _, d := range destNames {
		kind := destPolicy[d]
		if d == ordered {
			kind += ", order: per_object"
		}
		fmt.Fprintf(w, "destination %s (%s): %d events delivered, %d requests, %d failed or hung on purpose\n", d, kind, r.delivered[d], r.requests[d], r.refused[d])
	}
	fmt.Fprintf(w, "held (hold policy, after a crash): %d; skipped as stale (legitimately): %d\n", r.held, r.skipped)
	fmt.Fprintf(w, "lost = %d\n", r.lost)
	for _, e := range r.lostExamples {
		fmt.Fprintf(w, "  lost: %s\n", e)
	}
	fmt.Fprintf(w, "unexplained duplicates = %d (explained: %d by a reclaim after a crash or lost database, %d by a 2xx that reached the gateway after its timeout)\n", r.unexplained, r.explained, r.late)
	for _, e := range r.unexplainedEx {
		fmt.Fprintf(w, "  duplicate: %s\n", e)
	}
	fmt.Fprintf(w, "in-flight overlaps = %d (two attempts of one delivery at once: %d; two deliveries of one object at once, at %s: %d)\n",
		r.overlapDelivery+r.overlapObject, r.overlapDelivery, ordered, r.overlapObject)
	fmt.Fprintf(w, "unflagged version inversions = %d (at %s, a version delivered after a higher one of its object without X-AnyHook-Stale)\n", r.inversions, ordered)
	for _, e := range r.inFlightEx {
		fmt.Fprintf(w, "  in flight: %s\n", e)
	}
	fmt.Fprintf(w, "claims released unsent (the database answered them with too little of their lease left) = %d\n", r.released)
	a := &r.answers
	fmt.Fprintf(w, "ingest answers: %d outside fault windows (median %s, p99 %s, max %s), %d during one (max %s)\n",
		a.outside.answers, ms(a.p50), ms(a.p99), ms(a.outside.max), a.inside.answers, ms(a.inside.max))
	fmt.Fprintf(w, "5xx outside fault windows = %d (%s); during fault windows: %d (%s)\n",
		a.outside.fivexx(), statusList(a.outside.status5xx), a.inside.fivexx(), statusList(a.inside.status5xx))
	slow := "no limit"
	if a.slow > 0 {
		slow = "> " + a.slow.String()
	}
	fmt.Fprintf(w, "slow answers (%s) outside fault windows = %d; during fault windows: %d\n", slow, a.outside.slow, a.inside.slow)
	fmt.Fprintf(w, "no answer outside fault windows = %d; during fault windows: %d\n", a.outside.noAnswer, a.inside.noAnswer)
	if a.inside.fivexx()+a.inside.noAnswer > 0 {
		fmt.Fprintf(w, "  5xx or no answer by fault: %s\n", kindList(a.inside.byFault))
	}
	for _, e := range a.outsideExamples {
		fmt.Fprintf(w, "  outside fault windows: %s\n", e)
	}
	if r.bursts > 0 {
		fmt.Fprintf(w, "hot object %s: %d bursts of %d new events, each repeated in the next burst; %d requests, every event %.0f times at once, identical, over the running gateways\n",
			hotObject, r.bursts, stressNew, r.burstRequests, float64(r.burstRequests)/float64(max(1, r.burstEvents)))
	}
	if r.deadlocksRead {
		fmt.Fprintf(w, "PostgreSQL deadlocks = %d (pg_stat_database)\n", r.deadlocks)
	}
	fmt.Fprintf(w, "log verify: %s\n", r.logVerify)
	if r.ok() {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}

// api calls the admin API of a running gateway.
func (s *soak) api(ctx context.Context, path string, v any) error {
	base := s.load.pickGateway()
	if base == "" {
		return fmt.Errorf("no gateway running")
	}
	req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := s.load.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// countReleases adds to s.released the claims the gateway at base has
// released since it started (anyhook_releases_total, every destination):
// read before the process is killed, and at the end. A scrape that fails
// is logged and counts nothing.
func (s *soak) countReleases(ctx context.Context, base string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := s.load.client.Do(req)
	if err != nil {
		s.logf("reading %s/metrics: %v", base, err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != 200 {
		s.logf("reading %s/metrics: %d %v", base, resp.StatusCode, err)
		return
	}
	for line := range strings.Lines(string(body)) {
		if rest, ok := strings.CutPrefix(line, "anyhook_releases_total{"); ok {
			if _, v, ok := strings.Cut(rest, "} "); ok {
				n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				s.released.Add(int64(n))
			}
		}
	}
}

type apiDelivery struct {
	ID          string `json:"id"`
	EventID     string `json:"event_id"`
	Destination string `json:"destination"`
	Status      string `json:"status"`
	Attempts    []struct {
		Number     int    `json:"number"`
		StatusCode int    `json:"status_code"`
		Error      string `json:"error"`
	} `json:"attempts"`
}

// deliveries lists every delivery of a destination in a status.
func (s *soak) deliveries(ctx context.Context, dest, status string) (map[string]bool, error) {
	out := map[string]bool{}
	cursor := ""
	for {
		var page struct {
			Items      []apiDelivery `json:"items"`
			NextCursor string        `json:"next_cursor"`
		}
		q := url.Values{"status": {status}, "destination": {dest}, "limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if err := s.api(ctx, "/api/deliveries?"+q.Encode(), &page); err != nil {
			return nil, err
		}
		for _, d := range page.Items {
			out[d.EventID] = true
		}
		if page.NextCursor == "" || len(page.Items) == 0 {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

type pendingDelivery struct {
	ev   *event
	dest string
}

// reconcile waits until every acknowledged event is accounted for at each
// of its destinations (delivered, held or legitimately skipped) or the
// settle timeout passes, then counts losses and duplicates.
func (s *soak) reconcile(ctx context.Context) (*report, error) {
	l := s.load
	r := &report{
		sends: l.sends.Load(), failures: l.failures.Load(), dupsSent: l.dupsSent.Load(),
		reordered: l.reordered.Load(), rejected: l.rejected.Load(),
		delivered: map[string]int{}, requests: map[string]int{}, refused: map[string]int{},
	}
	evs := l.all()
	r.events = int64(len(evs))
	// The highest acknowledged version of each object: an older event may
	// legitimately be skipped as stale.
	maxVersion := map[string]int{}
	for _, ev := range evs {
		if ev.object != "" && ev.version > maxVersion[ev.object] {
			maxVersion[ev.object] = ev.version
		}
	}
	var pending []pendingDelivery
	for _, ev := range evs {
		for _, d := range routes[ev.source] {
			pending = append(pending, pendingDelivery{ev, d})
		}
	}
	deadline := time.Now().Add(settleTimeout)
	var wrongSkips []string
	for {
		var still []pendingDelivery
		for _, p := range pending {
			if !s.dests[p.dest].got(p.ev.id) {
				still = append(still, p)
			}
		}
		pending = still
		if len(pending) == 0 {
			break
		}
		// Held and skipped deliveries are final: ask the store.
		held, err1 := s.deliveries(ctx, "charges", "held")
		skipped := map[string]map[string]bool{}
		var err2 error
		for d := range destPolicy {
			if skipped[d], err2 = s.deliveries(ctx, d, "skipped"); err2 != nil {
				break
			}
		}
		if err1 == nil && err2 == nil {
			still = still[:0]
			wrongSkips = wrongSkips[:0]
			for _, p := range pending {
				switch {
				case p.dest == "charges" && held[p.ev.id]:
					r.held++
				case skipped[p.dest][p.ev.id] && p.ev.object != "" && p.ev.version < maxVersion[p.ev.object]:
					r.skipped++
				case skipped[p.dest][p.ev.id]:
					wrongSkips = append(wrongSkips, fmt.Sprintf("%s event %s (%s %s) skipped as stale but no newer version exists", p.dest, p.ev.id, p.ev.source, p.ev.key))
					still = append(still, p)
				default:
					still = append(still, p)
				}
			}
			pending = still
		} else {
			s.logf("reconcile: admin API: %v", firstErr(err1, err2))
		}
		if len(pending) == 0 || len(pending) == len(wrongSkips) || time.Now().After(deadline) {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.logf("reconcile: %d deliveries not yet accounted for", len(pending))
		time.Sleep(2 * time.Second)
	}
	r.lost = len(pending)
	for i, p := range pending {
		if i == 10 {
			break
		}
		st := "unknown"
		var ev struct {
			Deliveries []apiDelivery `json:"deliveries"`
		}
		if err := s.api(ctx, "/api/events/"+p.ev.id, &ev); err == nil {
			for _, d := range ev.Deliveries {
				if d.Destination == p.dest {
					st = d.Status
				}
			}
		}
		r.lostExamples = append(r.lostExamples, fmt.Sprintf("%s event %s (%s %s): delivery status %s", p.dest, p.ev.id, p.ev.source, p.ev.key, st))
	}
	r.lostExamples = append(r.lostExamples, wrongSkips...)

	for name, d := range s.dests {
		req, refused, delivered := d.counts()
		r.requests[name], r.refused[name], r.delivered[name] = req, refused, delivered
		f := d.inFlight.Report()
		r.overlapDelivery, r.overlapObject, r.inversions = r.overlapDelivery+f.PerDelivery, r.overlapObject+f.PerObject, r.inversions+f.Inversions
		for _, e := range f.Examples {
			r.inFlightEx = append(r.inFlightEx, name+": "+e)
		}
		twice, split := d.duplicates()
		for id, attempts := range twice {
			// Each 2xx the destination gave, but the one the store
			// records as the delivery, must match an attempt whose
			// outcome the gateway never saw: "outcome unknown" (a
			// reclaim after its worker died or lost the database) or no
			// response at all (the 2xx came after the timeout).
			var ev struct {
				Deliveries []apiDelivery `json:"deliveries"`
			}
			if err := s.api(ctx, "/api/events/"+id, &ev); err != nil {
				return nil, fmt.Errorf("explain duplicate %s: %w", id, err)
			}
			type rec struct {
				code int
				err  string
			}
			store := map[string]rec{}
			for _, dl := range ev.Deliveries {
				if dl.Destination == name {
					for _, a := range dl.Attempts {
						store[strconv.Itoa(a.Number)] = rec{a.StatusCode, a.Error}
					}
				}
			}
			delivered := false
			var reclaimed, late int
			var why []string
			for _, n := range attempts {
				a, ok := store[n]
				switch {
				case ok && a.code >= 200 && a.code < 300 && !delivered:
					delivered = true // the delivery itself
				case ok && strings.HasPrefix(a.err, "outcome unknown"):
					reclaimed++
				case ok && a.code == 0 && a.err != "":
					late++
				default:
					r.unexplained++
					why = append(why, fmt.Sprintf("attempt %s recorded as %+v", n, a))
				}
			}
			if !delivered {
				// No 2xx is recorded as the delivery (e.g. held after
				// the crash): the first one is it, not a duplicate.
				if reclaimed > 0 {
					reclaimed--
				} else if late > 0 {
					late--
				}
			}
			r.explained += reclaimed
			r.late += late
			if len(why) > 0 {
				r.unexplainedEx = append(r.unexplainedEx, fmt.Sprintf("%s (%s) answered 2xx to delivery %s at attempts %v: %s", name, destPolicy[name], id, attempts, strings.Join(why, "; ")))
			}
		}
		for key, ids := range split {
			r.unexplained += len(ids) - 1
			r.unexplainedEx = append(r.unexplainedEx, fmt.Sprintf("%s got provider event %q under %d AnyHook ids %v (dedup failure)", name, key, len(ids), ids))
		}
	}
	if n := l.mismatches.Load(); n > 0 {
		r.unexplained += int(n)
		r.unexplainedEx = append(r.unexplainedEx, fmt.Sprintf("%d re-sent events were acknowledged with another AnyHook id", n))
	}
	if len(r.unexplainedEx) > 20 {
		r.unexplainedEx = r.unexplainedEx[:20]
	}
	return r, nil
}

// ms rounds d for the report.
func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// verifyLog runs `anyhook log verify`. A binary without the command
// (it says "not built yet", or does not know it) counts as skipped.
func (s *soak) verifyLog(ctx context.Context) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.o.binary, "log", "verify", "--config", s.cfgPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	msg := strings.TrimSpace(out.String())
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	switch {
	case err == nil:
		return "ok: " + firstLine(msg), true
	case strings.Contains(msg, "not built yet") || strings.Contains(msg, "unknown command"):
		return "skipped (not available in this binary): " + firstLine(msg), true
	default:
		return "FAILED: " + strings.ReplaceAll(msg, "\n", "; "), false
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
