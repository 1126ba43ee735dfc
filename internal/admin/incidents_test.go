package admin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/store"
)

func TestIncidents(t *testing.T) {
	t.Parallel()
	told := make(chan store.IncidentChange, 4)
	f := setupWith(t, admin.Options{Token: token, Now: func() time.Time { return clock }, OnIncident: func(c store.IncidentChange) { told <- c }})
	ev := f.seed("stripe", "evt_1", []byte(`{}`), 0)
	p := store.IncidentPolicy{ResolveAfter: time.Minute}
	cs, err := f.store.RecordIncidents(t.Context(), []store.IncidentAttempt{
		{Destination: "billing", Kind: "refused", EventID: ev, Error: "connection refused", At: clock},
		{Destination: "ci", Kind: "5xx", EventID: ev, Error: "HTTP 500", At: clock},
	}, p)
	if err != nil || len(cs) != 2 {
		t.Fatalf("%v, %v", cs, err)
	}
	id := cs[0].Incident.ID

	l := items(t, f.mustStatus(f.do("GET", "/api/incidents?state=open&destination=billing", ""), 200))
	if len(l) != 1 || l[0]["id"] != id || l[0]["kind"] != "refused" || l[0]["events"] != 1.0 {
		t.Fatalf("list: %v", l)
	}
	one := f.mustStatus(f.do("GET", "/api/incidents/"+id, ""), 200).json(t)
	if s, _ := one["sample_event_ids"].([]any); len(s) != 1 || s[0] != ev {
		t.Fatalf("one: %v", one)
	}
	for _, c := range []struct{ path, body, want string }{
		{"/api/incidents?state=closed", "", "unknown state"},
		{"/api/incidents?colour=red", "", "unknown query parameter"},
		{"/api/incidents/" + id + "/acknowledge", `{"note":"a\nb"}`, "note"},
		{"/api/incidents/" + id + "/acknowledge", `{"nope":1}`, "nope"},
	} {
		method := "GET"
		if c.body != "" {
			method = "POST"
		}
		r := f.mustStatus(f.do(method, c.path, c.body), 400)
		if !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s %s: %s; want it to name %q", method, c.path, r.body, c.want)
		}
	}
	f.mustStatus(f.do("GET", "/api/incidents/"+store.NewID(), ""), 404)

	ack := f.mustStatus(f.do("POST", "/api/incidents/"+id+"/acknowledge", `{"note":"on it"}`), 200).json(t)
	if ack["state"] != "acknowledged" || ack["acknowledged_by"] != "admin" || ack["note"] != "on it" {
		t.Fatalf("acknowledge: %v", ack)
	}
	r := f.mustStatus(f.do("POST", "/api/incidents/"+id+"/acknowledge", ""), 400)
	if !strings.Contains(string(r.body), "is acknowledged") {
		t.Errorf("acknowledge twice: %s", r.body)
	}
	if len(told) != 0 {
		t.Fatalf("an acknowledge told %v", <-told)
	}
	res := f.mustStatus(f.do("POST", "/api/incidents/"+id+"/resolve", `{"note":"rolled back"}`), 200).json(t)
	if res["state"] != "resolved" || res["resolved_by"] != "admin" || res["note"] != "rolled back" {
		t.Fatalf("resolve: %v", res)
	}
	if c := <-told; len(told) != 0 || c.Change != store.ChangeResolved || c.Incident.ID != id {
		t.Fatalf("resolve told %+v; want its resolve, for the alert", c)
	}
	if l := items(t, f.mustStatus(f.do("GET", "/api/incidents?state=unresolved", ""), 200)); len(l) != 1 || l[0]["destination"] != "ci" {
		t.Fatalf("unresolved: %v", l)
	}
}
