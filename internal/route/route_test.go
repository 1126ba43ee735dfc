package route

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	charge := &Event{Source: "stripe", Type: "charge.refunded", ID: "evt_1", Object: "ch_1", Version: "1700000000",
		Header: http.Header{"Stripe-Signature": {"t=1,v1=x"}, "Content-Type": {"application/json"}},
		Body:   []byte(`{"id":"evt_1","type":"charge.refunded","data":{"object":{"amount":25000,"fee":1.5,"currency":"usd"}}}`)}
	small := &Event{Source: "stripe", Type: "charge.refunded", Body: []byte(`{"data":{"object":{"amount":900}}}`)}
	form := &Event{Source: "twilio", Body: []byte(`a=1&b=2`)}
	for _, tc := range []struct {
		expr string
		ev   *Event
		want bool
		err  string
	}{
		{`type.startsWith("invoice.") || (type == "charge.refunded" && body.data.object.amount > 10000)`, charge, true, ""},
		{`type.startsWith("invoice.") || (type == "charge.refunded" && body.data.object.amount > 10000)`, small, false, ""},
		{`body.data.object.fee > 1`, charge, true, ""},
		{`body.data.object.fee < 1.6`, charge, true, ""},
		{`headers["content-type"] == "application/json"`, charge, true, ""},
		{`source == "stripe" && id == "evt_1" && object == "ch_1" && version == "1700000000"`, charge, true, ""},
		{`body == null`, form, true, ""},
		{`has(body.data) && body.data.object.currency == "usd"`, charge, true, ""},
		{`body.missing.amount > 1`, charge, false, "no such key"},
		{`body.data.object.currency`, charge, false, ErrNotBool.Error()},
		{`body.data.object.amount > 1`, form, false, "no such key"},
	} {
		f, err := Compile(tc.expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.expr, err)
		}
		got, err := f.Match(NewInput(tc.ev))
		if got != tc.want {
			t.Errorf("%q on %s: got %v, want %v (err %v)", tc.expr, tc.ev.Body, got, tc.want, err)
		}
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: err %v, want %q", tc.expr, err, tc.err)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		`type ==`:                      "invalid CEL expression: column",
		`typo == "x"`:                  "undeclared reference to 'typo'",
		`type == 1`:                    "no matching overload",
		`type`:                         "the expression is a string",
		`size(headers)`:                "the expression is a int",
		strings.Repeat("a", MaxExpr+1): "longer than",
	} {
		_, err := Compile(expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%.40q) = %v, want an error containing %q", expr, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("Compile(%.40q): error on several lines: %q", expr, err)
		}
	}
}

func TestCostLimit(t *testing.T) {
	t.Parallel()
	// A comprehension over a large body list goes over the limit: no
	// match, with an error, rather than unbounded work.
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := range 20000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`1`)
	}
	b.WriteString(`]}`)
	f, err := Compile(`body.items.all(x, body.items.exists(y, y == x))`)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := f.Match(NewInput(&Event{Body: []byte(b.String())}))
	if ok || err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("Match = %v, %v; want false and a cost limit error", ok, err)
	}
	// What it spent is the whole limit: a search totals that.
	if _, cost, _ := f.MatchCost(NewInput(&Event{Body: []byte(b.String())})); cost != CostLimit {
		t.Errorf("cost over the limit = %d, want %d", cost, CostLimit)
	}
}

// TestMatchCost: an evaluation says what it cost, the body's decoding
// included, so that a search over many events can bound their total.
func TestMatchCost(t *testing.T) {
	t.Parallel()
	f, err := Compile(`body.amount > 1000 && body.note != ""`)
	if err != nil {
		t.Fatal(err)
	}
	small := []byte(`{"amount":2000,"note":"x"}`)
	big := []byte(`{"amount":2000,"note":"` + strings.Repeat("x", 5000) + `"}`)
	ok, c1, err := f.MatchCost(NewInput(&Event{Body: small}))
	if !ok || err != nil || c1 == 0 {
		t.Fatalf("small body: %v, cost %d, %v; want a match at some cost", ok, c1, err)
	}
	ok, c2, err := f.MatchCost(NewInput(&Event{Body: big}))
	if !ok || err != nil || c2 <= c1 || c2 > CostLimit {
		t.Errorf("5 KB body: %v, cost %d, %v; want a match costing more than %d", ok, c2, err, c1)
	}
	// An error (no such key) still says what it cost.
	if _, c, err := f.MatchCost(NewInput(&Event{Body: []byte(`{"amount":2000}`)})); err == nil || c > CostLimit {
		t.Errorf("missing key: cost %d, %v; want an error", c, err)
	}
}

// TestConcurrentMatch: one compiled filter serves every ingest request at
// once (run with -race).
func TestConcurrentMatch(t *testing.T) {
	t.Parallel()
	f, err := Compile(`type.startsWith("invoice.") || (has(body.amount) && body.amount > 10) || headers["x-a"] == "1"`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				amount := g*100 + i
				ev := &Event{Type: "charge.x", Header: http.Header{"X-A": {"0"}}, Body: fmt.Appendf(nil, `{"amount":%d}`, amount)}
				ok, err := f.Match(NewInput(ev))
				if err != nil || ok != (amount > 10) {
					errs <- fmt.Sprintf("amount %d: %v, %v", amount, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestConcurrentCompile: configs are loaded, and tests compile, from
// several goroutines at once. The first undeclared name in an environment
// (an error that consults the checker's catalog) next to a comprehension
// (which copies the checker's environment) raced inside cel-go; each
// round takes a fresh environment so that every round can catch it (run
// with -race).
func TestConcurrentCompile(t *testing.T) {
	t.Parallel()
	exprs := []struct {
		expr  string
		valid bool
	}{
		{`typo == "x"`, false},
		{`body.items.all(i, i > 0)`, true},
		{`headers.exists(k, k == "a")`, true},
		{`nope && body.x`, false},
	}
	for range 20 {
		c := newCompiler()
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, tc := range exprs {
			wg.Go(func() {
				<-start
				if _, err := c.compile(tc.expr); (err == nil) != tc.valid {
					t.Errorf("compile(%q): %v, want valid %v", tc.expr, err, tc.valid)
				}
			})
		}
		close(start)
		wg.Wait()
	}
}

// BenchmarkMatch is one event evaluated by one filter that reads the
// body: the cost a filtered destination adds per event at ingest, the
// body's JSON decoding included (shared by every filter of the event).
func BenchmarkMatch(b *testing.B) {
	f, err := Compile(`type.startsWith("charge.") && body.data.object.amount > 1000`)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"evt_1","object":"event","api_version":"2024-06-20","created":1700000000,"type":"charge.succeeded","livemode":false,` +
		`"data":{"object":{"id":"ch_1","object":"charge","amount":2000,"currency":"usd","status":"succeeded","paid":true,"metadata":{"pad":"` +
		strings.Repeat("x", 700) + `"}}}}`)
	ev := &Event{Source: "stripe", Type: "charge.succeeded", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := f.Match(NewInput(ev)); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkMatchTypeOnly is a filter on the type alone: the body is never
// decoded.
func BenchmarkMatchTypeOnly(b *testing.B) {
	f, err := Compile(`type.startsWith("charge.")`)
	if err != nil {
		b.Fatal(err)
	}
	ev := &Event{Source: "stripe", Type: "charge.succeeded", Body: []byte(`{}`)}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := f.Match(NewInput(ev)); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// A pattern of matches() that is not a string literal is refused when the
// filter is compiled: compiling a regular expression from the event (an
// 8 KB one took 184 MB in a loop) is not bounded by the cost limit. A
// literal is compiled once, with the filter.
func TestMatchesPatternMustBeLiteral(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{`body.s.matches(body.p)`, `matches(type, body.p)`, `type.matches("a" + type)`} {
		if _, err := Compile(expr); err == nil || !strings.Contains(err.Error(), "the pattern of matches() must be a string literal") {
			t.Errorf("Compile(%s) = %v, want the pattern refused", expr, err)
		}
	}
	f, err := Compile(`type.matches("^invoice\\.")`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Match(NewInput(&Event{Type: "invoice.paid"})); !ok || err != nil {
		t.Fatalf("a literal pattern: %v, %v", ok, err)
	}
}
