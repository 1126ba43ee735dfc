package inbox_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/inbox"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// signed returns the headers AnyHook puts on a delivery of body signed with
// secret at ts, using the reference Standard Webhooks library.
func signed(t testing.TB, secret, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	h.Set("X-AnyHook-Delivery", id)
	h.Set("X-AnyHook-Source", "stripe")
	return h
}

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_750_000_000, 0)
	v, err := inbox.NewStandardWebhooks(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = func() time.Time { return now }
	body := []byte(`{"type":"invoice.paid"}`)
	good := signed(t, testSecret, "evt_1", now, body)
	otherSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret, 32 bytes long!!!"))
	for _, c := range []struct {
		name   string
		header func() http.Header
		body   []byte
		ok     bool
	}{
		{"valid", func() http.Header { return good }, body, true},
		{"tampered body", func() http.Header { return good }, []byte(`{"type":"invoice.paid "}`), false},
		{"other secret", func() http.Header { return signed(t, otherSecret, "evt_1", now, body) }, body, false},
		{"other id", func() http.Header { h := good.Clone(); h.Set("webhook-id", "evt_2"); return h }, body, false},
		{"rotation: second signature matches", func() http.Header {
			h := good.Clone()
			other := signed(t, otherSecret, "evt_1", now, body).Get("webhook-signature")
			h.Set("webhook-signature", other+" "+good.Get("webhook-signature"))
			return h
		}, body, true},
		{"v2 only", func() http.Header {
			h := good.Clone()
			h.Set("webhook-signature", strings.Replace(good.Get("webhook-signature"), "v1,", "v2,", 1))
			return h
		}, body, false},
		{"too old", func() http.Header { return signed(t, testSecret, "evt_1", now.Add(-6*time.Minute), body) }, body, false},
		{"too new", func() http.Header { return signed(t, testSecret, "evt_1", now.Add(6*time.Minute), body) }, body, false},
		{"within tolerance", func() http.Header { return signed(t, testSecret, "evt_1", now.Add(-4*time.Minute), body) }, body, true},
		{"missing signature", func() http.Header { h := good.Clone(); h.Del("webhook-signature"); return h }, body, false},
		{"malformed timestamp", func() http.Header { h := good.Clone(); h.Set("webhook-timestamp", "soon"); return h }, body, false},
		{"garbage signature", func() http.Header { h := good.Clone(); h.Set("webhook-signature", "v1,!!!"); return h }, body, false},
	} {
		err := v.Verify(c.body, c.header())
		if (err == nil) != c.ok {
			t.Errorf("%s: Verify = %v; want ok=%v", c.name, err, c.ok)
		}
		if err != nil {
			if !errors.Is(err, inbox.ErrBadSignature) {
				t.Errorf("%s: %v does not wrap ErrBadSignature", c.name, err)
			}
			if want := good.Get("webhook-signature"); strings.Contains(err.Error(), strings.TrimPrefix(want, "v1,")) {
				t.Errorf("%s: error reveals the expected signature", c.name)
			}
		}
	}
	if _, err := inbox.NewStandardWebhooks("whsec_not base64!"); !errors.Is(err, inbox.ErrInvalid) {
		t.Errorf("bad secret: %v", err)
	}
}

func FuzzStandardWebhooks(f *testing.F) {
	now := time.Unix(1_750_000_000, 0)
	h := signed(f, testSecret, "evt_1", now, []byte("body"))
	f.Add("evt_1", h.Get("webhook-timestamp"), h.Get("webhook-signature"), []byte("body"))
	f.Add("", "1", "v1,", []byte{})
	f.Add("a", "-99999999999999999999", "v1,AAAA v1 v2,x", []byte("x"))
	v, err := inbox.NewStandardWebhooks(testSecret)
	if err != nil {
		f.Fatal(err)
	}
	v.Now = func() time.Time { return now }
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		hdr := http.Header{}
		hdr.Set("webhook-id", id)
		hdr.Set("webhook-timestamp", ts)
		hdr.Set("webhook-signature", sig)
		err := v.Verify(body, hdr)
		if err != nil && !errors.Is(err, inbox.ErrBadSignature) {
			t.Fatalf("error %v does not wrap ErrBadSignature", err)
		}
		if err == nil {
			// Only a real signature may pass: the reference library agrees.
			wh, _ := standardwebhooks.NewWebhook(testSecret)
			if err := wh.VerifyIgnoringTimestamp(body, hdr); err != nil {
				t.Fatalf("accepted what the reference rejects: %v", err)
			}
		}
	})
}
