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
	Machine      Machine `json:"machine"`
	Database     string  `json:"database"` // sqlite | postgres
	Events       int     `json:"events"`
	BodySize     int     `json:"body_size"`
	Concurrency  int     `json:"concurrency"`
	Destinations int     `json:"destinations"`
	Filter       string  `json:"filter,omitempty"` // on every destination
	Duplicates   int     `json:"duplicates"`
	SinkDelayMS  float64 `json:"sink_delay_ms"`

	// Baseline is the bare net/http server under the same load.
	Baseline *Phase `json:"baseline,omitempty"`
	// Ingest is the gateway, new events.
	Ingest   *Phase    `json:"ingest"`
	Delivery *Delivery `json:"delivery"`
	// RatioToBare is Ingest.EventsPerSec / Baseline.EventsPerSec.
	RatioToBare float64 `json:"ratio_to_bare,omitempty"`

	// Storm is the duplicate storm: Events new events, each sent
	// Duplicates times at once.
	Storm         *Phase    `json:"storm,omitempty"`
	StormDelivery *Delivery `json:"storm_delivery,omitempty"`
	// DuplicateCPUPer1k is the CPU the storm spent beyond the new-event
	// run, per 1,000 duplicate requests.
	DuplicateCPUPer1k float64 `json:"duplicate_cpu_s_per_1k,omitempty"`

	PeakRSSMiB float64  `json:"peak_rss_mib"`
	Failures   []string `json:"failures,omitempty"`
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
	// CPUSeconds is the whole process's CPU (client, server, sink) from
	// the first request until the last delivery arrived.
	CPUSeconds       float64 `json:"cpu_s"`
	CPUPer1kRequests float64 `json:"cpu_s_per_1k_requests"`
	CPUPer1kEvents   float64 `json:"cpu_s_per_1k_events"`
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
	// the last ingest request was answered.
	BacklogAtIngestEnd int `json:"backlog_at_ingest_end"`
	Redeliveries       int `json:"redeliveries"`
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
	fmt.Fprintf(w, "anyhook bench — %s, %d events × %s, %d connections, %d destination(s)", r.Database, r.Events, sizeString(r.BodySize), r.Concurrency, r.Destinations)
	if r.Filter != "" {
		fmt.Fprintf(w, " with filter %s", r.Filter)
	}
	if r.SinkDelayMS > 0 {
		fmt.Fprintf(w, ", sink delay %gms", r.SinkDelayMS)
	}
	fmt.Fprintf(w, "\n%d CPUs (%s), %s, %s\n\n", r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.OS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\trequests/s\tevents/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\tCPU s/1k req\tfailed\t")
	row := func(name string, p *Phase) {
		if p == nil {
			return
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.1f\t%.3f\t%d\t\n", name, p.RequestsPerSec, p.EventsPerSec,
			p.P50MS, p.P90MS, p.P99MS, p.MaxMS, p.CPUPer1kRequests, p.Failed)
	}
	row("bare net/http", r.Baseline)
	row("anyhook ingest", r.Ingest)
	row("duplicate storm", r.Storm)
	drow := func(name string, d *Delivery) {
		if d == nil {
			return
		}
		fmt.Fprintf(tw, "%s\t%.0f\t\t%.2f\t%.2f\t%.2f\t%.1f\t\t\t\n", name, d.PerSec, d.P50MS, d.P90MS, d.P99MS, d.MaxMS)
	}
	drow("delivery (e2e)", r.Delivery)
	drow("storm delivery", r.StormDelivery)
	tw.Flush()
	fmt.Fprintln(w)
	if r.RatioToBare > 0 {
		fmt.Fprintf(w, "ingest / bare net/http:        %.1f%%\n", 100*r.RatioToBare)
	}
	if r.Ingest != nil {
		fmt.Fprintf(w, "CPU per 1,000 events:          %.3f s (ingest + delivery, whole process incl. load client and sink)\n", r.Ingest.CPUPer1kEvents)
	}
	if r.Baseline != nil {
		fmt.Fprintf(w, "  of which client + bare:      %.3f s (the same load against bare net/http)\n", r.Baseline.CPUPer1kEvents)
	}
	if r.Delivery != nil {
		fmt.Fprintf(w, "delivery backlog at ingest end: %d of %d (redeliveries %d)\n", r.Delivery.BacklogAtIngestEnd, r.Events*r.Destinations, r.Delivery.Redeliveries)
	}
	if r.Storm != nil {
		fmt.Fprintf(w, "duplicate storm:               %d accepted, %d duplicate; %.3f CPU s per 1k duplicate requests vs %.3f per 1k new events\n",
			r.Storm.Accepted, r.Storm.Duplicate, r.DuplicateCPUPer1k, r.Ingest.CPUPer1kEvents)
	}
	fmt.Fprintf(w, "peak RSS:                      %.0f MiB\n", r.PeakRSSMiB)
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
