package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// paddle verifies Paddle Billing's Paddle-Signature: ts=<unix s>;h1=<hex>,
// HMAC-SHA256 of "ts:body" keyed with the raw secret. Several h1 values
// (secret rotation) are accepted; unknown schemes are ignored.
type paddle struct {
	keys [][]byte
	tol  time.Duration
}

func buildPaddle(_ *Settings, keys [][]byte, tol time.Duration) (Provider, error) {
	return &paddle{keys, tol}, nil
}

func (p *paddle) Verify(r *Request, now time.Time) (anyhook.Verification, error) {
	h := r.Header.Get("Paddle-Signature")
	if h == "" {
		return anyhook.Verification{}, missing("Paddle-Signature")
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "ts":
			ts = v
		case "h1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	t, ok := parseUnix(ts, false)
	if !ok {
		return anyhook.Verification{}, fail("malformed Paddle-Signature header: no valid ts= timestamp")
	}
	if len(sigs) == 0 {
		return anyhook.Verification{}, fail("malformed Paddle-Signature header: no h1 signature")
	}
	v, err := signedBy("paddle h1", matchAny(sha256.New, p.keys, sigs, []byte(ts), []byte(":"), r.Body))
	return timely(v, err, t, now, p.tol)
}

// Extract: dedup on event_id (notification_id differs per destination);
// order the entity data.id by occurred_at.
func (p *paddle) Extract(r *Request) (Extracted, error) {
	v := jsonScalars(r.Body, []string{"event_id"}, []string{"occurred_at"}, []string{"data", "id"})
	e := Event{DedupKey: v[0]}
	e.Object, e.Version = order(v[2], v[1])
	return Extracted{Events: []Event{e}}, nil
}

// contentKey: the signed "ts:body". Only a source whose id rule reads an
// unsigned header uses it; the body's event_id is signed.
func (p *paddle) contentKey(r *Request) string {
	return contentKey("paddle", []byte(headerParam(r.Header.Get("Paddle-Signature"), ";", "ts")), []byte(":"), r.Body)
}

func signPaddle(secret string, r *Request, now time.Time) error {
	ts := unixString(now)
	r.Header.Set("Paddle-Signature", "ts="+ts+";h1="+hex.EncodeToString(mac(sha256.New, []byte(secret), []byte(ts), []byte(":"), r.Body)))
	return nil
}

// typeOfPaddle: the body's event_type (transaction.completed).
func typeOfPaddle(_ *Request, body []byte) string {
	return jsonScalars(body, []string{"event_type"})[0]
}
