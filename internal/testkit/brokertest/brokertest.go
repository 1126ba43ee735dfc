// Package brokertest gives tests the brokers the project's scripts start:
// NATS with JetStream (scripts/nats.sh) and RabbitMQ
// (scripts/rabbitmq.sh), each on a port of its own. Without a reachable
// broker a test is skipped with a hint, except under CI=true, where it
// fails: CI must never skip the broker tests.
package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSURL is the test NATS server: $ANYHOOK_TEST_NATS, default
// nats://127.0.0.1:14222.
func NATSURL() string {
	if s := os.Getenv("ANYHOOK_TEST_NATS"); s != "" {
		return s
	}
	return "nats://127.0.0.1:14222"
}

// reachable skips (or, under CI, fails) t unless rawURL's host answers.
func reachable(t testing.TB, rawURL, script string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("broker URL: %v", err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the broker tests must run in CI, but %s is unreachable: %v", u.Host, err)
		}
		t.Skipf("broker unreachable (%v); start it (%s) to run this test", err, script)
	}
	c.Close()
}

// Name returns a name no other test uses: prefix and random hex.
func Name(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + strings.ToUpper(hex.EncodeToString(b))
}

// Stream is a JetStream stream made for one test, deleted when it ends.
type Stream struct {
	URL, Name, Subject string
	js                 jetstream.JetStream
}

// NATSStream creates a stream storing one subject of its own, with the
// duplicate window given (0: the server's default, two minutes).
func NATSStream(t testing.TB, window time.Duration) *Stream {
	t.Helper()
	reachable(t, NATSURL(), "scripts/nats.sh")
	nc, err := nats.Connect(NATSURL())
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := &Stream{URL: NATSURL(), Name: Name("T"), js: js}
	s.Subject = "anyhook.test." + strings.ToLower(s.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: s.Name, Subjects: []string{s.Subject}, Duplicates: window, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		js.DeleteStream(ctx, s.Name)
	})
	return s
}

// Messages reads every message the stream holds, in order.
func (s *Stream) Messages(t testing.TB) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}
