package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
)

// checkShape holds a JSON value to the OpenAPI schema it is documented
// by: every key an object has is a documented property, every required
// property is there, recursively through $refs and arrays.
func checkShape(t *testing.T, doc map[string]any, schema map[string]any, v any, at string) {
	t.Helper()
	if ref, ok := schema["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		schema = doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		if props == nil {
			return // a free-form object (headers)
		}
		for k, x := range v {
			p, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("%s.%s is not documented", at, k)
				continue
			}
			checkShape(t, doc, p, x, at+"."+k)
		}
		req, _ := schema["required"].([]any)
		for _, k := range req {
			if _, ok := v[k.(string)]; !ok {
				t.Errorf("%s lacks required %s", at, k)
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for _, x := range v {
				checkShape(t, doc, items, x, at+"[]")
			}
		}
	}
}

func shapeOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func openapiMap(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestOpenAPIEventShape: an event with a verification and duplicate
// arrivals is what the Event schema documents.
func TestOpenAPIEventShape(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ev := anyhook.Event{ID: "e1", Source: "shop", ReceivedAt: now, Method: "POST", Path: "/webhooks/shop",
		Header: http.Header{"A": {"1"}}, Body: []byte("{}"), Duplicates: 21, RemoteAddr: "192.0.2.1:1",
		Verification: anyhook.Verification{Method: anyhook.VerifySignature, Scheme: "shopify hmac-sha256", Secret: 1},
		Arrivals:     []anyhook.Arrival{{Seq: 1, ReceivedAt: now, RemoteAddr: "192.0.2.2:2", Header: http.Header{"A": {"2"}}, HeaderCut: true}}}
	a := &API{known: map[string]bool{}}
	doc := openapiMap(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, full := range []bool{true, false} {
		checkShape(t, doc, schemas["Event"].(map[string]any), shapeOf(t, a.toEvent(ev, full)), "event")
	}
	ev.Verification = anyhook.Verification{Secret: -1}
	got := shapeOf(t, a.toEvent(ev, false)).(map[string]any)["verification"]
	checkShape(t, doc, schemas["Verification"].(map[string]any), got, "verification")
	if v := got.(map[string]any); v["method"] != "unknown" || v["secret_index"] != nil {
		t.Errorf("unrecorded verification = %v", v)
	}
}

// TestOpenAPIRejectionShape: a rejection is what the Rejection schema
// documents.
func TestOpenAPIRejectionShape(t *testing.T) {
	t.Parallel()
	doc := openapiMap(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	checkShape(t, doc, schemas["RejectionList"].(map[string]any),
		shapeOf(t, listJSON[rejectionJSON]{Items: []rejectionJSON{{ID: 1, Reason: anyhook.RejectSignature}}}), "rejections")
}

func TestOpenAPIIncidentShape(t *testing.T) {
	t.Parallel()
	doc := openapiMap(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	full := incidentJSON{ID: "i", Destination: "billing", Kind: "5xx", State: "resolved", FirstSeen: at, LastSeen: at, Attempts: 1, Events: 1,
		LatestError: "HTTP 500", SampleEventIDs: []string{"e"}, HealthySince: at, EscalatedAt: at, AcknowledgedBy: "api", AcknowledgedAt: at,
		Note: "n", ResolvedAt: at, ResolvedBy: "auto", Reopens: 1, BreakerTripped: at, BreakerResumed: at}
	checkShape(t, doc, schemas["IncidentList"].(map[string]any), shapeOf(t, listJSON[incidentJSON]{Items: []incidentJSON{full, {ID: "j"}}}), "incidents")
}
