package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// slack verifies X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:ts:body">
// with X-Slack-Request-Timestamp inside the tolerance.
type slack struct {
	keys [][]byte
	tol  time.Duration
}

func buildSlack(_ *Settings, keys [][]byte, tol time.Duration) (Provider, error) {
	return &slack{keys, tol}, nil
}

func (p *slack) Verify(r *Request, now time.Time) (anyhook.Verification, error) {
	h := r.Header.Get("X-Slack-Signature")
	if h == "" {
		return anyhook.Verification{}, missing("X-Slack-Signature")
	}
	ts := r.Header.Get("X-Slack-Request-Timestamp")
	if ts == "" {
		return anyhook.Verification{}, missing("X-Slack-Request-Timestamp")
	}
	t, ok := parseUnix(ts, false)
	if !ok {
		return anyhook.Verification{}, fail("malformed X-Slack-Request-Timestamp header")
	}
	hx, ok := strings.CutPrefix(h, "v0=")
	sig, err := hex.DecodeString(hx)
	if !ok || err != nil {
		return anyhook.Verification{}, fail("malformed X-Slack-Signature header: want v0=<hex>")
	}
	v, err := signedBy("slack v0", matchAny(sha256.New, p.keys, [][]byte{sig}, []byte("v0:"), []byte(ts), []byte(":"), r.Body))
	return timely(v, err, t, now, p.tol)
}

// Extract: Events API envelopes dedup on event_id (retries, including the
// parallel ones after a 3 s timeout, repeat it). Slash commands and
// interactivity (forms) carry no event id; their trigger_id is unique per
// invocation. A url_verification request is answered with its challenge.
func (p *slack) Extract(r *Request) (Extracted, error) {
	if jsonBody(r.Body) {
		v := jsonScalars(r.Body, []string{"type"}, []string{"event_id"}, []string{"challenge"})
		if v[0] == "url_verification" {
			b, _ := json.Marshal(struct {
				Challenge string `json:"challenge"`
			}{v[2]})
			return Extracted{Challenge: &Challenge{ContentType: "application/json", Body: b}}, nil
		}
		return Extracted{Events: []Event{{DedupKey: v[1]}}}, nil
	}
	var e Event
	if form, err := url.ParseQuery(string(r.Body)); err == nil {
		e.DedupKey = form.Get("trigger_id")
		if e.DedupKey == "" && form.Get("payload") != "" {
			e.DedupKey = jsonScalars([]byte(form.Get("payload")), []string{"trigger_id"})[0]
		}
	}
	return Extracted{Events: []Event{e}}, nil
}

// contentKey: the signed "v0:ts:body". Only a source whose id rule reads
// an unsigned header uses it; event_id and trigger_id are signed.
func (p *slack) contentKey(r *Request) string {
	return contentKey("slack", []byte("v0:"), []byte(r.Header.Get("X-Slack-Request-Timestamp")), []byte(":"), r.Body)
}

func signSlack(secret string, r *Request, now time.Time) error {
	ts := unixString(now)
	r.Header.Set("X-Slack-Request-Timestamp", ts)
	r.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac(sha256.New, []byte(secret), []byte("v0:"), []byte(ts), []byte(":"), r.Body)))
	return nil
}

// typeOfSlack: the body's type, or for event_callback the inner event's
// (app_mention); an interactive form's payload type (block_actions).
func typeOfSlack(r *Request, body []byte) string {
	if jsonBody(body) {
		v := jsonScalars(body, []string{"type"}, []string{"event", "type"})
		if v[0] == "event_callback" && v[1] != "" {
			return v[1]
		}
		return v[0]
	}
	if form, err := url.ParseQuery(string(body)); err == nil && form.Get("payload") != "" {
		return jsonScalars([]byte(form.Get("payload")), []string{"type"})[0]
	}
	return ""
}
