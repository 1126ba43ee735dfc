package admin

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// FuzzDecodeJSON: the strict body decoder never panics and fails only with
// a 400.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"destination":"billing"}`, `{"action":"resend"}`, `{"source":"s","dry_run":true}`,
		`{"x":1}`, `{} {}`, `[`, `null`, `"str"`, `{"dry_run":"yes"}`, `{"source":{"a":[1,2]}}`, "\xff\xfe",
		`{"destination":"\u0000"}`, `{"since":1e999}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range []any{&replayEventRequest{}, &bulkReplayRequest{}, &resolveRequest{}} {
			err := decodeJSON(strings.NewReader(s), v)
			if err == nil {
				continue
			}
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
				t.Fatalf("%q: %v (%T)", s, err, err)
			}
		}
	})
}
