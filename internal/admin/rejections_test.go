package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
)

func TestListRejections(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var rs []anyhook.Rejection
	for i, reason := range []string{anyhook.RejectSignature, anyhook.RejectUnknownSource, anyhook.RejectSignature} {
		source, known := "stripe", true
		if reason == anyhook.RejectUnknownSource {
			source, known = "nope", false
		}
		rs = append(rs, anyhook.Rejection{At: clock.Add(time.Duration(i) * time.Minute), Source: source, KnownSource: known, Reason: reason,
			Status: 400, Message: "no signature matched", RemoteAddr: "203.0.113.1:1", BodySize: 10, BodySHA256: "ab"})
	}
	if err := f.store.RecordRejections(t.Context(), rs); err != nil {
		t.Fatal(err)
	}
	all := items(t, f.mustStatus(f.do("GET", "/api/rejections", ""), http.StatusOK))
	if len(all) != 3 || all[0]["reason"] != anyhook.RejectSignature || all[1]["source"] != "nope" || all[1]["known_source"] != false {
		t.Fatalf("all = %v", all)
	}
	if got := items(t, f.mustStatus(f.do("GET", "/api/rejections?source=stripe&reason=rejected_signature&since=2026-03-01T12:01:00Z", ""), http.StatusOK)); len(got) != 1 {
		t.Errorf("filtered = %v", got)
	}
	page := f.mustStatus(f.do("GET", "/api/rejections?limit=2", ""), http.StatusOK)
	if next := nextCursor(t, page); next == "" || len(items(t, f.mustStatus(f.do("GET", "/api/rejections?limit=2&cursor="+next, ""), http.StatusOK))) != 1 {
		t.Errorf("paging: next %q", next)
	}
	for _, bad := range []string{"reason=bad_signature", "cursor=abc", "limit=0", "sorce=stripe", "since=yesterday"} {
		r := f.do("GET", "/api/rejections?"+bad, "")
		if r.status != http.StatusBadRequest || r.errCode(t) != "invalid_parameter" {
			t.Errorf("?%s: %d %s", bad, r.status, r.body)
		}
	}
}
