package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriteResultMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, res := range []Result{
		{Status: "accepted", ID: "0190a0a0-0000-7000-8000-000000000000"},
		{Status: "duplicate", ID: "evt_1.x-Y"},
		{Status: "accepted", ID: `a"b<c>&\u2028`}, // needs escaping: the slow path
		{Status: "accepted", ID: "e1", Events: []EventResult{{"accepted", "e1"}, {"duplicate", "e0"}}},
	} {
		fast := httptest.NewRecorder()
		writeResult(fast, &res)
		var want bytes.Buffer
		json.NewEncoder(&want).Encode(res)
		if fast.Body.String() != want.String() || fast.Code != 200 || fast.Header().Get("Content-Type") != "application/json" {
			t.Errorf("writeResult(%+v) = %d %q %q, want 200 %q", res, fast.Code, fast.Header(), fast.Body, want.String())
		}
	}
}

// onlyReader hides a reader's other methods.
type onlyReader struct{ io.Reader }

func TestReadBody(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name    string
		length  int64 // Content-Length; -1: unknown (chunked)
		max     int64
		wantErr bool
	}{
		{"announced", 5000, 5000, false},
		{"chunked", -1, 5000, false},
		{"announced over max", 5000, 4999, true},
		{"chunked over max", -1, 4999, true},
	} {
		r := httptest.NewRequest("POST", "/webhooks/s", onlyReader{strings.NewReader(body)})
		r.ContentLength = tc.length
		got, err := readBody(httptest.NewRecorder(), r, tc.max)
		var tooBig *http.MaxBytesError
		switch {
		case tc.wantErr && !errors.As(err, &tooBig):
			t.Errorf("%s: err = %v, want a MaxBytesError", tc.name, err)
		case !tc.wantErr && (err != nil || string(got) != body):
			t.Errorf("%s: %d bytes, %v", tc.name, len(got), err)
		}
	}
	// Empty bodies are empty, not nil; a read body is never reused.
	for _, n := range []int64{0, -1} {
		r := httptest.NewRequest("POST", "/webhooks/s", onlyReader{strings.NewReader("")})
		r.ContentLength = n
		if got, err := readBody(httptest.NewRecorder(), r, 10); got == nil || len(got) != 0 || err != nil {
			t.Errorf("empty body (length %d) = %#v, %v", n, got, err)
		}
	}
	r1 := httptest.NewRequest("POST", "/", onlyReader{strings.NewReader("first")})
	r1.ContentLength = -1
	a, _ := readBody(httptest.NewRecorder(), r1, 100)
	r2 := httptest.NewRequest("POST", "/", onlyReader{strings.NewReader("other")})
	r2.ContentLength = -1
	readBody(httptest.NewRecorder(), r2, 100)
	if string(a) != "first" {
		t.Errorf("a pooled buffer leaked into an earlier body: %q", a)
	}
}
