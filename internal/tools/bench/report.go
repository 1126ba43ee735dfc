package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of one bench run; --json prints it as is.
type Report struct {
	Machine  Machine `json:"machine"`
	Database string  `json:"database"` // sqlite | postgres
	// Processes is how many gateway processes shared the database;
	// GatewayCPUs the CPUs they were pinned to (none: all).
	Processes   int   `json:"processes"`
	GatewayCPUs []int `json:"gateway_cpus,omitempty"`
	// GatewayProcs is the gateway process's GOMAXPROCS: at least two,
	// also on one CPU (internal/procs).
	GatewayProcs int     `json:"gateway_gomaxprocs,omitempty"`
	Provider     string  `json:"provider"` // stripe | generic
	Events       int     `json:"events"`
	BodySize     int     `json:"body_size"`
	Concurrency  int     `json:"concurrency"`
	Destinations int     `json:"destinations"`
	Filter       string  `json:"filter,omitempty"` // on every destination
	Duplicates   int     `json:"duplicates"`
	SinkDelayMS  float64 `json:"sink_delay_ms"`
	RandomIDs    bool    `json:"random_ids,omitempty"` // --random-ids
	// MaxQueueWait is the gateway's ingest.max_queue_wait: past it, shed.
	MaxQueueWait string `json:"max_queue_wait"`

	// Baseline is the bare net/http server under the same load.
	Baseline *Phase `json:"baseline,omitempty"`
	// Relay is the non-durable relay under the same load: it answers,
	// then forwards from memory to the same sink (no storage, no dedup, no
	// retries); RelayDelivery its deliveries.
	Relay         *Phase    `json:"relay,omitempty"`
	RelayDelivery *Delivery `json:"relay_delivery,omitempty"`
	// Ingest is the gateway, new events.
	Ingest   *Phase    `json:"ingest"`
	Delivery *Delivery `json:"delivery"`
	// RatioToBare is Ingest.EventsPerSec / Baseline.EventsPerSec.
	RatioToBare float64 `json:"ratio_to_bare,omitempty"`
	// RatioToRelay is Ingest.EventsPerSec / Relay.EventsPerSec.
	RatioToRelay float64 `json:"ratio_to_relay,omitempty"`

	// Storm is the duplicate storm: Events new events, each sent
	// Duplicates times at once.
	Storm         *Phase    `json:"storm,omitempty"`
	StormDelivery *Delivery `json:"storm_delivery,omitempty"`
	// DuplicateCPUPer1k is the gateway CPU the storm spent beyond the
	// new-event run, per 1,000 duplicate requests.
	DuplicateCPUPer1k float64 `json:"duplicate_cpu_s_per_1k,omitempty"`

	// OpenLoop is the open-loop run (--ingest-rate); OpenLoopFloor the
	// same schedule against the durable floor (floorCommand), in a
	// process of its own on the same CPUs: the tail of a durable commit
	// and a delivery alone on this machine.
	OpenLoop      *OpenLoop `json:"open_loop,omitempty"`
	OpenLoopFloor *OpenLoop `json:"open_loop_floor,omitempty"`

	// PeakRSSMiB is the gateway process's peak RSS; BenchPeakRSSMiB this
	// process's (load client with its pre-built requests, sink, relay).
	PeakRSSMiB      float64  `json:"peak_rss_mib"`
	BenchPeakRSSMiB float64  `json:"bench_peak_rss_mib"`
	Failures        []string `json:"failures,omitempty"`
}

// Phase is one timed load run as the client saw it.
type Phase struct {
	Requests       int     `json:"requests"`
	Seconds        float64 `json:"seconds"`
	RequestsPerSec float64 `json:"requests_per_s"`
	EventsPerSec   float64 `json:"events_per_s"` // distinct events / Seconds
	P50MS          float64 `json:"p50_ms"`
	P90MS          float64 `json:"p90_ms"`
	P99MS          float64 `json:"p99_ms"`
	MaxMS          float64 `json:"max_ms"`
	Accepted       int     `json:"accepted"`
	Duplicate      int     `json:"duplicate"`
	Failed         int     `json:"failed"`
	FirstError     string  `json:"first_error,omitempty"`
	// CPUSeconds is the bench process's CPU from the first request until
	// the last delivery arrived: the load client and the sink, and for
	// the bare and relay runs the server too (they run in it).
	CPUSeconds       float64 `json:"cpu_s"`
	CPUPer1kRequests float64 `json:"cpu_s_per_1k_requests"`
	CPUPer1kEvents   float64 `json:"cpu_s_per_1k_events"`
	// GatewayCPUSeconds is the gateway process's own CPU (its getrusage,
	// user + system) in the same window; GatewayCPUPerEventUS that per
	// event (ingested, and delivered to every destination);
	// GatewayCores that over the window's wall time. Zero for the bare
	// and relay runs.
	GatewayCPUSeconds    float64 `json:"gateway_cpu_s,omitempty"`
	GatewayCPUPerEventUS float64 `json:"gateway_cpu_us_per_event,omitempty"`
	GatewayCores         float64 `json:"gateway_cores,omitempty"`
	// DatabaseCPUSeconds is the PostgreSQL server's CPU in the same
	// window, when it runs on this host (every process of the server:
	// other clients' work on it counts too); DatabaseCPUPerEventUS that
	// per event. Zero for SQLite, which runs in the gateway's process.
	DatabaseCPUSeconds    float64 `json:"database_cpu_s,omitempty"`
	DatabaseCPUPerEventUS float64 `json:"database_cpu_us_per_event,omitempty"`
}

// gateway records the gateway process's CPU over a window.
func (p *Phase) gateway(cpu, window time.Duration, events int) {
	p.GatewayCPUSeconds = cpu.Seconds()
	p.GatewayCPUPerEventUS = float64(cpu.Microseconds()) / float64(events)
	if window > 0 {
		p.GatewayCores = cpu.Seconds() / window.Seconds()
	}
}

// Delivery is the end-to-end view: from the first send of an event to its
// arrival at the sink.
type Delivery struct {
	Deliveries int     `json:"deliveries"`
	Seconds    float64 `json:"seconds"` // first request sent → last delivery arrived
	PerSec     float64 `json:"per_s"`
	P50MS      float64 `json:"p50_ms"`
	P90MS      float64 `json:"p90_ms"`
	P99MS      float64 `json:"p99_ms"`
	MaxMS      float64 `json:"max_ms"`
	// BacklogAtIngestEnd is how many deliveries were still to arrive when
	// the last ingest request was answered; DeliveredAtIngestEnd how many
	// had arrived.
	BacklogAtIngestEnd   int `json:"backlog_at_ingest_end"`
	DeliveredAtIngestEnd int `json:"delivered_at_ingest_end"`
	Redeliveries         int `json:"redeliveries"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func phase(lr *loadResult, events int, cpu time.Duration) *Phase {
	n := len(lr.Latencies)
	p := &Phase{
		Requests: n, Seconds: lr.Elapsed.Seconds(),
		P50MS: ms(percentile(lr.Latencies, 50)), P90MS: ms(percentile(lr.Latencies, 90)),
		P99MS: ms(percentile(lr.Latencies, 99)), MaxMS: ms(percentile(lr.Latencies, 100)),
		Accepted: lr.Accepted, Duplicate: lr.Duplicate, Failed: lr.Failed, FirstError: lr.FirstError,
		CPUSeconds: cpu.Seconds(),
	}
	if p.Seconds > 0 {
		p.RequestsPerSec = float64(n) / p.Seconds
		p.EventsPerSec = float64(events) / p.Seconds
	}
	p.CPUPer1kRequests = 1000 * p.CPUSeconds / float64(n)
	p.CPUPer1kEvents = 1000 * p.CPUSeconds / float64(events)
	return p
}

func delivery(lr *loadResult, sr *sinkRun) *Delivery {
	d := &Delivery{Deliveries: int(sr.count.Load()), Redeliveries: int(sr.extra.Load())}
	var lat []time.Duration
	var last int64
	start := lr.Start.UnixNano()
	for _, dest := range sr.arrived {
		for i := range dest {
			at := dest[i].Load()
			sent := lr.SentAt[i].Load()
			if at == 0 || sent == 0 {
				continue
			}
			last = max(last, at)
			lat = append(lat, time.Duration(at-(start+sent-1)))
		}
	}
	slices.Sort(lat)
	if last > 0 {
		d.Seconds = time.Duration(last - start).Seconds()
		d.PerSec = float64(d.Deliveries) / d.Seconds
	}
	d.P50MS, d.P90MS = ms(percentile(lat, 50)), ms(percentile(lat, 90))
	d.P99MS, d.MaxMS = ms(percentile(lat, 99)), ms(percentile(lat, 100))
	return d
}

// check records a run whose requests did not all succeed.
func (r *Report) check(name string, p *Phase, events int) {
	if p == nil {
		return
	}
	if p.Failed > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%s: %d of %d requests failed (first: %s)", name, p.Failed, p.Requests, p.FirstError))
	}
	if p.Accepted != events {
		r.Failures = append(r.Failures, fmt.Sprintf("%s: %d events accepted, want %d", name, p.Accepted, events))
	}
}

func (r *Report) print(w io.Writer) {
	fmt.Fprintf(w, "anyhook bench — %s, %s source, %d events × %s, %d connections, %d destination(s)",
		r.Database, r.Provider, r.Events, sizeString(r.BodySize), r.Concurrency, r.Destinations)
	if r.Filter != "" {
		fmt.Fprintf(w, " with filter %s", r.Filter)
	}
	ids := "in order"
	if r.RandomIDs {
		ids = "in random order"
	}
	fmt.Fprintf(w, ", event ids %s, ingest.max_queue_wait %s", ids, r.MaxQueueWait)
	if r.SinkDelayMS > 0 {
		fmt.Fprintf(w, ", sink delay %gms", r.SinkDelayMS)
	}
	if r.Processes > 1 {
		fmt.Fprintf(w, ", %d gateway processes", r.Processes)
	}
	if len(r.GatewayCPUs) > 0 {
		fmt.Fprintf(w, ", gateway on CPUs %v", r.GatewayCPUs)
	}
	if r.GatewayProcs > 0 {
		fmt.Fprintf(w, ", GOMAXPROCS %d", r.GatewayProcs)
	}
	fmt.Fprintf(w, "\n%d CPUs (%s), %s, %s\n\n", r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.OS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\trequests/s\tevents/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\tdelivered at load end\tgateway CPU µs/event\tfailed\t")
	row := func(name string, p *Phase, d *Delivery) {
		if p == nil {
			return
		}
		delivered := "—"
		if d != nil && r.Destinations > 0 {
			delivered = fmt.Sprintf("%d of %d", d.DeliveredAtIngestEnd, r.Events*r.Destinations)
		}
		gw := "—"
		if p.GatewayCPUSeconds > 0 {
			gw = fmt.Sprintf("%.0f", p.GatewayCPUPerEventUS)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.1f\t%s\t%s\t%d\t\n", name, p.RequestsPerSec, p.EventsPerSec,
			p.P50MS, p.P90MS, p.P99MS, p.MaxMS, delivered, gw, p.Failed)
	}
	row("bare net/http", r.Baseline, nil)
	row("relay (keeps nothing)", r.Relay, r.RelayDelivery)
	row("anyhook ingest", r.Ingest, r.Delivery)
	row("duplicate storm", r.Storm, r.StormDelivery)
	drow := func(name string, d *Delivery) {
		if d == nil {
			return
		}
		fmt.Fprintf(tw, "%s\t%.0f\t\t%.2f\t%.2f\t%.2f\t%.1f\t\t\t\t\n", name, d.PerSec, d.P50MS, d.P90MS, d.P99MS, d.MaxMS)
	}
	drow("relay delivery (e2e)", r.RelayDelivery)
	drow("delivery (e2e)", r.Delivery)
	drow("storm delivery", r.StormDelivery)
	tw.Flush()
	fmt.Fprintln(w)
	if ol := r.OpenLoop; ol != nil {
		// The run lasts until the last answer: say so beside the schedule,
		// or "for 17 s" after --duration 10s reads as a bug.
		fmt.Fprintf(w, "open loop: %.0f requests/s (%.0f%% of what the closed loop took and delivered) scheduled over %.0f s, the last answered at %.0f s: %d sent, %d accepted, %d shed (ingest.max_queue_wait %s), %d failed, %d errors (%d timed out), %d delivered\n",
			ol.Rate, ol.CapacityPct, float64(ol.Sent)/ol.Rate, ol.Seconds, ol.Sent, ol.Accepted, ol.Shed, r.MaxQueueWait, ol.Failed, ol.Errors, ol.TimedOut, ol.Delivered)
		fmt.Fprintf(w, "  ack latency of the accepted, from when each was due, ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.1f; longest stall %.1f ms at %.1f s; gateway CPU %.0f µs/event\n",
			ol.P50MS, ol.P90MS, ol.P99MS, ol.P999MS, ol.MaxMS, ol.LongestStallMS, ol.StallAtS, ol.ServerCPUPerEventUS)
		if ol.Shed > 0 {
			fmt.Fprintf(w, "  shed (the bench's source says overload: shed) answered within %.2f ms (p99), from when each was due\n", ol.ShedP99MS)
		}
		if ol.FirstError != "" {
			fmt.Fprintf(w, "  the first failure or error: %s\n", ol.FirstError)
		}
		fmt.Fprintf(w, "  the client sent them late by p99 %.2f ms, max %.1f ms; each then waited for a connection p99 %.2f ms (in the latencies above)\n",
			ol.LagP99MS, ol.LagMaxMS, ol.ConnP99MS)
		if fl := r.OpenLoopFloor; fl != nil {
			fmt.Fprintf(w, "durable floor, the same rate and count after the gateway stopped (net/http, each body in a group commit synced with fsync, then forwarded; its own process): %d sent, %d accepted, %d shed, %d failed, %d errors (%d timed out), %d delivered\n",
				fl.Sent, fl.Accepted, fl.Shed, fl.Failed, fl.Errors, fl.TimedOut, fl.Delivered)
			fmt.Fprintf(w, "  ack latency of the accepted, from when each was due, ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.1f; longest stall %.1f ms at %.1f s; floor CPU %.0f µs/event\n",
				fl.P50MS, fl.P90MS, fl.P99MS, fl.P999MS, fl.MaxMS, fl.LongestStallMS, fl.StallAtS, fl.ServerCPUPerEventUS)
		}
		fmt.Fprintln(w, "  (from when each was due to be sent, not when it was: a client or a machine that cannot keep the schedule adds its lag to the latencies and the stall;")
		fmt.Fprintln(w, "  the longest stall is the longest time no answer came back while a request was outstanding; CPU per event from the first request to the last delivery,")
		fmt.Fprintln(w, "  higher than the closed loop's below capacity, where fewer events share each commit)")
		fmt.Fprintln(w)
	}
	if r.RatioToBare > 0 {
		fmt.Fprintf(w, "anyhook / bare net/http:       %.1f%%\n", 100*r.RatioToBare)
	}
	if r.RatioToRelay > 0 {
		fmt.Fprintf(w, "anyhook / relay:               %.1f%%\n", 100*r.RatioToRelay)
	}
	if p := r.Ingest; p != nil {
		fmt.Fprintf(w, "gateway CPU per event:         %.0f µs (the closed-loop run; the gateway process's own getrusage, first request → last delivery; %.2f cores)\n",
			p.GatewayCPUPerEventUS, p.GatewayCores)
		if p.DatabaseCPUSeconds > 0 {
			fmt.Fprintf(w, "database CPU per event:        %.0f µs (the PostgreSQL server's processes on this host, its other clients' work included)\n",
				p.DatabaseCPUPerEventUS)
		}
		fmt.Fprintf(w, "client + sink CPU per event:   %.0f µs (this process)\n", 1000*p.CPUPer1kEvents)
		fmt.Fprintf(w, "whole bench CPU per 1k events: %.3f s (the closed-loop run: gateway + client + sink)\n",
			p.CPUPer1kEvents+1000*p.GatewayCPUSeconds/float64(r.Events))
	}
	if r.Baseline != nil {
		fmt.Fprintf(w, "  client + bare per 1k events: %.3f s (the same load against bare net/http)\n", r.Baseline.CPUPer1kEvents)
	}
	if r.Relay != nil {
		fmt.Fprintf(w, "  client + relay + sink:       %.3f s per 1k events\n", r.Relay.CPUPer1kEvents)
	}
	if r.Delivery != nil {
		fmt.Fprintf(w, "delivery backlog at ingest end: %d of %d (redeliveries %d)\n", r.Delivery.BacklogAtIngestEnd, r.Events*r.Destinations, r.Delivery.Redeliveries)
	}
	if r.Storm != nil {
		fmt.Fprintf(w, "duplicate storm:               %d accepted, %d duplicate; gateway %.3f CPU s per 1k duplicate requests vs %.3f per 1k new events\n",
			r.Storm.Accepted, r.Storm.Duplicate, r.DuplicateCPUPer1k, 1000*r.Ingest.GatewayCPUSeconds/float64(r.Events))
	}
	fmt.Fprintf(w, "peak RSS:                      gateway %.0f MiB; bench process %.0f MiB (client with its pre-built requests, sink)\n", r.PeakRSSMiB, r.BenchPeakRSSMiB)
	if len(r.Failures) == 0 {
		fmt.Fprintln(w, "checks:                        ok")
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
}

func sizeString(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strings.TrimSpace(fmt.Sprintf("%d B", n))
}
