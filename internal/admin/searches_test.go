package admin_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSavedSearches: POST /api/searches saves a named search of the
// events list (its query checked: a bad filter, an unknown parameter, a
// name taken are refused naming why), GET lists them by name, DELETE
// removes one; q=body:… in GET /api/events is the body= search.
func TestSavedSearches(t *testing.T) {
	t.Parallel()
	f := setup(t)
	type saved struct {
		ID, Name, Query string
		CreatedBy       string `json:"created_by"`
	}
	save := func(name, query string) saved {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"name": name, "query": query})
		var out saved
		if err := json.Unmarshal(f.mustStatus(f.do("POST", "/api/searches", string(body)), http.StatusCreated).body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	big := save("big invoices", "q="+url.QueryEscape("filter:body.amount > 1000")+"&source=stripe")
	acme := save("  acme ", "?q=body%3Acus_123")
	if big.Query != "q=filter%3Abody.amount+%3E+1000&source=stripe" || acme.Name != "acme" || acme.CreatedBy != "admin" || acme.ID == "" {
		t.Errorf("saved %+v and %+v", big, acme)
	}
	for req, says := range map[string]string{
		`{"name":"acme","query":"q=x"}`:                       `a saved search named \"acme\" exists`,
		`{"name":"","query":"q=x"}`:                           "name: required",
		`{"name":"x","query":""}`:                             "query: empty",
		`{"name":"x","query":"limit=5"}`:                      `unknown parameter \"limit\"`,
		`{"name":"x","query":"q=filter%3Abody.amount%20%3E"}`: "invalid CEL expression: column",
		`{"name":"x","query":"status=nope"}`:                  `unknown status \"nope\"`,
		`{"name":"x","query":"source=stripe&source=demo"}`:    "source given 2 times",
		`{"name":"x","query":"status=dead&q=body%3Acus"}`:     "cannot take status",
	} {
		r := f.mustStatus(f.do("POST", "/api/searches", req), http.StatusBadRequest)
		if !strings.Contains(string(r.body), says) {
			t.Errorf("%s: %s; want it to say %s", req, r.body, says)
		}
	}
	var list struct{ Items []saved }
	if err := json.Unmarshal(f.mustStatus(f.do("GET", "/api/searches", ""), http.StatusOK).body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[0].ID != acme.ID || list.Items[1].ID != big.ID {
		t.Errorf("listed %+v; want acme, big invoices", list.Items)
	}
	f.mustStatus(f.do("DELETE", "/api/searches/"+acme.ID, ""), http.StatusNoContent)
	f.mustStatus(f.do("DELETE", "/api/searches/"+acme.ID, ""), http.StatusNotFound)

	// The saved query is what GET /api/events takes: q=body:… searches
	// inside the bodies.
	id := f.seed("stripe", "evt_s", []byte(`{"customer":"cus_123"}`), 0)
	var evs struct {
		Items    []struct{ ID string }
		Searched *struct{ Complete bool }
	}
	until := url.QueryEscape(clock.Add(time.Minute).Format(time.RFC3339))
	if err := json.Unmarshal(f.mustStatus(f.do("GET", "/api/events?until="+until+"&"+acme.Query, ""), http.StatusOK).body, &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || evs.Items[0].ID != id || evs.Searched == nil {
		t.Errorf("GET /api/events?%s: %+v; want [%s], searched", acme.Query, evs, id)
	}
	for params, says := range map[string]string{
		"q=body%3A":          "say what to look for",
		"q=body%3Ax&body=y":  "give one",
		"q=filter%3A1%20%2B": "invalid CEL expression",
	} {
		r := f.mustStatus(f.do("GET", "/api/events?"+params, ""), http.StatusBadRequest)
		if !strings.Contains(string(r.body), says) {
			t.Errorf("%s: %s; want it to say %q", params, r.body, says)
		}
	}
}
