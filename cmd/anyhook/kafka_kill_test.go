package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestKillAfterKafkaWriteResendsSameID: claim-then-commit holds for a
// Kafka destination. The gateway's produce request reaches the broker
// (franz-go's kfake, in this process) and the gateway is killed (kill -9)
// before it could record the outcome; the broker then stores the record.
// After a restart the delivery is produced again by a new producer
// session, which Kafka does not dedupe: the topic holds the record twice,
// with the same X-AnyHook-Delivery-Id, and a consumer that dedupes on it
// sees the event once.
func TestKillAfterKafkaWriteResendsSameID(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "hooks"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		first := false
		once.Do(func() { first = true })
		if first { // hold the first produce until the gateway is dead
			close(arrived)
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false // the broker handles it as usual
	})
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    type: kafka
    kafka: {brokers: [%q], topic: hooks}
    sources: [stripe]
    timeout: 5s
    backoff: {initial: 50ms, max: 200ms}
`, secret, c.ListenAddrs()[0]))
	p := start(t, cfg)
	code, id, err := sendEvent(p.url, "evt_kafka_kill")
	if err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("no produce request reached the broker")
	}
	p.kill() // the ack cannot reach the gateway: the outcome is unknown
	close(release)

	p2 := start(t, cfg)
	var list struct {
		Items []struct {
			ID      string
			EventID string `json:"event_id"`
		}
	}
	testwait.For(t, "the delivery to be produced again and delivered", func() bool {
		gatewaytest.AdminJSON(t, p2.url+"/api/deliveries?status=delivered", &list)
		return len(list.Items) == 1
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("hooks"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < 2 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	seen := map[string]int{} // the consumer's dedup: by X-AnyHook-Delivery-Id
	for _, r := range recs {
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[strings.ToLower(h.Key)] = string(h.Value)
		}
		if hs["x-anyhook-delivery"] != id {
			t.Errorf("record of event %q, want %s", hs["x-anyhook-delivery"], id)
		}
		seen[hs["x-anyhook-delivery-id"]]++
	}
	if len(recs) != 2 || len(seen) != 1 || seen[list.Items[0].ID] != 2 {
		t.Fatalf("%d records, per X-AnyHook-Delivery-Id %v: want the delivery %s twice (the one before the kill, the re-send), deduped to one", len(recs), seen, list.Items[0].ID)
	}
}
