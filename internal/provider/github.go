package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// github verifies X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>.
// The legacy SHA-1 X-Hub-Signature is not accepted. Nothing is
// timestamped, so dedup is the only replay defence.
type github struct{ keys [][]byte }

func buildGitHub(_ *Settings, keys [][]byte, _ time.Duration) (Provider, error) {
	return &github{keys}, nil
}

func (p *github) Verify(r *Request, _ time.Time) (anyhook.Verification, error) {
	h := r.Header.Get("X-Hub-Signature-256")
	if h == "" {
		return anyhook.Verification{}, missing("X-Hub-Signature-256")
	}
	hx, ok := strings.CutPrefix(h, "sha256=")
	sig, err := hex.DecodeString(hx)
	if !ok || err != nil {
		return anyhook.Verification{}, fail("malformed X-Hub-Signature-256 header: want sha256=<hex>")
	}
	return signedBy("github sha256", matchAny(sha256.New, p.keys, [][]byte{sig}, r.Body))
}

// Extract: the dedup key is X-GitHub-Hook-ID:X-GitHub-Delivery, stable
// across redeliveries. Neither header is signed, so the content key is the
// body alone: a resend of one signed body under any delivery or hook id is
// a duplicate, and so is one event reaching the source through two hooks
// (they share X-GitHub-Delivery and the body). X-GitHub-Event is left out:
// the body says what happened (its action, its objects), and leaving it in
// would let a holder of one request make one event per event name.
func (p *github) Extract(r *Request) (Extracted, error) {
	d := r.Header.Get("X-GitHub-Delivery")
	if d == "" {
		// GitHub sends it on every delivery, ping included.
		return Extracted{}, missing("X-GitHub-Delivery")
	}
	return Extracted{Events: []Event{{DedupKey: r.Header.Get("X-GitHub-Hook-ID") + ":" + d, ContentKey: p.contentKey(r)}}}, nil
}

func (p *github) contentKey(r *Request) string { return contentKey("github", r.Body) }

func signGitHub(secret string, r *Request, _ time.Time) error {
	r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac(sha256.New, []byte(secret), r.Body)))
	return nil
}

// typeOfGitHub: X-GitHub-Event, with the body's action when it has one
// (pull_request.opened); push has none.
func typeOfGitHub(r *Request, body []byte) string {
	t := r.Header.Get("X-GitHub-Event")
	if t == "" {
		return ""
	}
	if a := jsonScalars(body, []string{"action"})[0]; a != "" {
		t += "." + a
	}
	return t
}
