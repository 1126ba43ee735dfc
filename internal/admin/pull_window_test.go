package admin_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An extended lease keeps its place in the stream's window: the stream
// leases no more while it is unsettled, even past the end it was sent
// with (max_in_flight holds).
func TestPullStreamExtendBreaksWindow(t *testing.T) {
	f, _ := pullFixture(t)
	f.seedPull("evt_a")
	f.seedPull("evt_b")
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.srv.URL+"/api/destinations/inbox/stream?max_in_flight=1&lease=2s", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan leasedDelivery, 4)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var d leasedDelivery
				if json.Unmarshal([]byte(data), &d) == nil {
					events <- d
				}
			}
		}
	}()
	first := <-events
	f.mustStatus(f.do("POST", "/api/destinations/inbox/extend", `{"lease_id": "`+first.LeaseID+`", "lease": "1m"}`), http.StatusOK)
	select {
	case d := <-events:
		t.Fatalf("the stream (max_in_flight=1) sent %s while %s's extended lease was unsettled", d.EventID, first.EventID)
	case <-time.After(4 * time.Second): // twice the first lease: past the end the stream knew
	}
}

// A pull token's replay of another destination's event answers as one
// of no event at all, quoting no internal id: a token for one
// destination learns nothing of which ids exist elsewhere.
func TestPullReplayOracle(t *testing.T) {
	f, _ := pullFixture(t)
	id := f.seedPull("evt_secret") // an inbox event; bob pulls billing
	exists := f.doAuth("POST", "/api/events/evt_secret/replay", `{"source": "stripe"}`, "Bearer "+bobToken)
	absent := f.doAuth("POST", "/api/events/evt_nothere/replay", `{"source": "stripe"}`, "Bearer "+bobToken)
	if exists.status != absent.status || strings.Contains(string(exists.body), id) {
		t.Fatalf("bob's replay of another destination's event: %d %s; of none: %d %s", exists.status, exists.body, absent.status, absent.body)
	}
}
