package sinktest_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestScriptAndRecord: the scripted statuses come first, then 200; each
// request is recorded whole, in order, and Next returns each once.
func TestScriptAndRecord(t *testing.T) {
	t.Parallel()
	s := sinktest.New(t, 500, 429)
	for i, want := range []int{500, 429, 200} {
		code, body := post(t, s.URL+"/hooks?n="+strings.Repeat("x", i), `{"i":`+strconv.Itoa(i)+`}`)
		if code != want || body != "answer "+strconv.Itoa(want) {
			t.Errorf("request %d: %d %q, want %d", i, code, body, want)
		}
	}
	rs := s.Wait(t, 3)
	if rs[0].Method != "POST" || rs[0].URL.RequestURI() != "/hooks?n=" || string(rs[0].Body) != `{"i":0}` || rs[0].Header.Get("Content-Type") != "application/json" {
		t.Errorf("first request recorded as %+v", rs[0])
	}
	for i := range 3 {
		if got := s.Next(t); string(got.Body) != string(rs[i].Body) {
			t.Errorf("Next %d = %s, want %s", i, got.Body, rs[i].Body)
		}
	}
}

// TestHold: held requests wait for Pass, one each, or Release; the sink
// counts how many it held at once.
func TestHold(t *testing.T) {
	t.Parallel()
	s := sinktest.Start(t, sinktest.Options{Hold: true, Answer: func(*http.Request, []byte) int { return http.StatusAccepted }})
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range 3 {
		wg.Go(func() { codes[i], _ = post(t, s.URL, "{}") })
	}
	s.Wait(t, 3)
	if n := s.MostInFlight(); n != 3 {
		t.Errorf("MostInFlight = %d, want 3 held at once", n)
	}
	s.Pass()
	s.Release()
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusAccepted {
			t.Errorf("request %d answered %d, want 202", i, c)
		}
	}
	if n := s.Count("Content-Type")["application/json"]; n != 3 {
		t.Errorf("Count = %d, want 3", n)
	}
}
