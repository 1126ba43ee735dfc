package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// anyhook bench runs the gateway as a process of its own — this binary,
// re-executed — and reports that process's CPU apart from the client's.
func TestBenchGatewayProcess(t *testing.T) {
	t.Parallel()
	code, out, errOut := exe(t, "bench", "--provider", "generic", "--events", "30", "--concurrency", "4", "--warmup", "5", "--json")
	var rep struct {
		Relay *struct {
			Accepted int `json:"accepted"`
		} `json:"relay"`
		Ingest struct {
			Accepted          int     `json:"accepted"`
			GatewayCPUSeconds float64 `json:"gateway_cpu_s"`
		} `json:"ingest"`
		Delivery struct {
			Deliveries int `json:"deliveries"`
		} `json:"delivery"`
		PeakRSSMiB float64 `json:"peak_rss_mib"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s\n%s", code, err, out, errOut)
	}
	if rep.Relay == nil || rep.Relay.Accepted != 30 || rep.Ingest.Accepted != 30 || rep.Delivery.Deliveries != 30 {
		t.Errorf("report: %s", out)
	}
	if rep.Ingest.GatewayCPUSeconds <= 0 || rep.PeakRSSMiB <= 0 {
		t.Errorf("the gateway process's CPU %v s, peak RSS %v MiB; want both measured", rep.Ingest.GatewayCPUSeconds, rep.PeakRSSMiB)
	}
}

// anyhook bench --fill fills a store through the store and times the read
// side on it: every request it times answers 200, and the store holds the
// events it added less the duplicates among them.
func TestBenchFill(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "fill.db")
	code, out, errOut := exe(t, "bench", "--fill", "1200", "--batch", "500", "--repeat", "2", "--database", db, "--json")
	var rep struct {
		Events   int64 `json:"events"`
		Requests []struct {
			Name   string  `json:"name"`
			Status int     `json:"status"`
			P95MS  float64 `json:"p95_ms"`
		} `json:"requests"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s\n%s", code, err, out, errOut)
	}
	// Events 107, 157, … repeat the dedup key of the event four before.
	if want := int64(1200 - 22); rep.Events != want {
		t.Errorf("the store holds %d events, want %d", rep.Events, want)
	}
	if len(rep.Requests) < 30 {
		t.Errorf("%d requests timed, want every page and list", len(rep.Requests))
	}
	paused := 0
	for _, r := range rep.Requests {
		if r.Status != 200 || r.P95MS <= 0 {
			t.Errorf("%s: status %d, p95 %v ms", r.Name, r.Status, r.P95MS)
		}
		if strings.HasPrefix(r.Name, "ci paused: ") {
			paused++
		}
	}
	if paused == 0 {
		t.Error("nothing timed with a destination paused")
	}
}
