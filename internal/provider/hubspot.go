package provider

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// hubspot verifies X-HubSpot-Signature-v3: base64 HMAC-SHA256, keyed with
// the app's client secret, of method + URI + body + timestamp, where URI is
// the URL HubSpot called with a few %XX escapes decoded and the timestamp is
// X-HubSpot-Request-Timestamp in milliseconds. The v1 and v2 signatures,
// which carry no timestamp, are refused.
type hubspot struct {
	keys [][]byte
	tol  time.Duration
}

func buildHubSpot(_ *Settings, keys [][]byte, tol time.Duration) (Provider, error) {
	return &hubspot{keys, tol}, nil
}

// hubspotURI decodes the escapes HubSpot lists for v3 signatures.
var hubspotURI = strings.NewReplacer(
	"%3A", ":", "%2F", "/", "%3F", "?", "%40", "@", "%21", "!", "%24", "$", "%27", "'",
	"%28", "(", "%29", ")", "%2A", "*", "%2C", ",", "%3B", ";",
	"%3a", ":", "%2f", "/", "%3f", "?", "%2a", "*", "%2c", ",", "%3b", ";",
)

func (p *hubspot) Verify(r *Request, now time.Time) (anyhook.Verification, error) {
	h := r.Header.Get("X-HubSpot-Signature-v3")
	if h == "" {
		if r.Header.Get("X-HubSpot-Signature") != "" {
			return anyhook.Verification{}, fail("missing X-HubSpot-Signature-v3 header (v1 and v2 signatures are not accepted)")
		}
		return anyhook.Verification{}, missing("X-HubSpot-Signature-v3")
	}
	ts := r.Header.Get("X-HubSpot-Request-Timestamp")
	if ts == "" {
		return anyhook.Verification{}, missing("X-HubSpot-Request-Timestamp")
	}
	t, ok := parseUnix(ts, true)
	if !ok {
		return anyhook.Verification{}, fail("malformed X-HubSpot-Request-Timestamp header")
	}
	sig, err := base64.StdEncoding.DecodeString(h)
	if err != nil {
		return anyhook.Verification{}, fail("malformed X-HubSpot-Signature-v3 header: want base64")
	}
	if r.URL == "" {
		return anyhook.Verification{}, fail("cannot verify a HubSpot signature without the public URL; set public_url")
	}
	v, err := signedBy("hubspot v3", matchAny(sha256.New, p.keys, [][]byte{sig}, []byte(hubspotMethod(r)), []byte(hubspotURI.Replace(r.URL)), r.Body, []byte(ts)))
	return timely(v, err, t, now, p.tol)
}

func hubspotMethod(r *Request) string {
	if r.Method == "" {
		return http.MethodPost
	}
	return r.Method
}

// Extract splits the batch (a JSON array of up to 100 events) into one
// event per item, each with the item's own bytes.
//
// HubSpot documents eventId as not guaranteed unique, so keying on it alone
// could swallow a genuine event. The key is the tuple that identifies one
// change, stable across HubSpot's retries (attemptNumber is left out):
// portalId:subscriptionId:eventId:objectId:occurredAt:propertyName.
//
// Ordering is occurredAt per object and property; the object is
// "<type>/<objectId>[/<propertyName>]", the type taken from objectTypeId or
// the subscriptionType prefix, since ids of contacts, companies and deals
// may coincide.
func (p *hubspot) Extract(r *Request) (Extracted, error) {
	items, err := jsonItems(r.Body)
	if err != nil {
		return Extracted{}, fail("malformed HubSpot body: want a JSON array of events")
	}
	x := Extracted{Events: make([]Event, 0, len(items))}
	for _, item := range items {
		v := jsonScalars(item,
			[]string{"portalId"}, []string{"subscriptionId"}, []string{"eventId"},
			[]string{"objectId"}, []string{"occurredAt"}, []string{"propertyName"},
			[]string{"objectTypeId"}, []string{"subscriptionType"})
		e := Event{Body: item}
		if strings.Join(v[:6], "") != "" {
			e.DedupKey = strings.Join(v[:6], ":")
		}
		if v[3] != "" {
			typ := v[6]
			if typ == "" {
				typ, _, _ = strings.Cut(v[7], ".")
			}
			obj := v[3]
			if typ != "" {
				obj = typ + "/" + obj
			}
			if v[5] != "" {
				obj += "/" + v[5]
			}
			e.Object, e.Version = order(obj, v[4])
		}
		x.Events = append(x.Events, e)
	}
	return x, nil
}

// contentKey: the signed method, URI, body and timestamp. Only a source
// whose id rule reads an unsigned header uses it; the items' ids are signed.
func (p *hubspot) contentKey(r *Request) string {
	return contentKey("hubspot", []byte(hubspotMethod(r)), []byte(hubspotURI.Replace(r.URL)), r.Body, []byte(r.Header.Get("X-HubSpot-Request-Timestamp")))
}

func signHubSpot(secret string, r *Request, now time.Time) error {
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	sum := mac(sha256.New, []byte(secret), []byte(hubspotMethod(r)), []byte(hubspotURI.Replace(r.URL)), r.Body, []byte(ts))
	r.Header.Set("X-HubSpot-Request-Timestamp", ts)
	r.Header.Set("X-HubSpot-Signature-v3", b64(sum))
	return nil
}

// typeOfHubSpot: each item's subscriptionType (contact.propertyChange).
func typeOfHubSpot(_ *Request, item []byte) string {
	return jsonScalars(item, []string{"subscriptionType"})[0]
}
