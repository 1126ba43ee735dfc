package main

import (
	"encoding/json"
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
