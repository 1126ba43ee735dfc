package route

import (
	"net/http"
	"testing"
)

// FuzzMatch: any body, any header value, any type — a filter answers true,
// false or an error, never panics, and answers the same twice (the input
// is decoded once and shared by filters).
func FuzzMatch(f *testing.F) {
	f.Add("invoice.paid", "application/json", []byte(`{"data":{"object":{"amount":25000}}}`))
	f.Add("", "", []byte(`a=1&b=2`))
	f.Add("x", "x", []byte(`[1,2,{"a":null}]`))
	f.Add("x", "x", []byte(`{"amount":1e400,"items":[1.5,"2",true]}`))
	var filters []*Filter
	for _, e := range []string{
		`type.startsWith("invoice.") || (type == "charge.refunded" && body.data.object.amount > 10000)`,
		`has(body.items) && body.items.exists(x, x == 2)`,
		`headers["content-type"].contains("json") && body != null`,
		`body.amount > 10.5`,
	} {
		flt, err := Compile(e)
		if err != nil {
			f.Fatal(err)
		}
		filters = append(filters, flt)
	}
	f.Fuzz(func(t *testing.T, typ, contentType string, body []byte) {
		in := NewInput(&Event{Type: typ, Header: http.Header{"Content-Type": {contentType}}, Body: body})
		for _, flt := range filters {
			a, errA := flt.Match(in)
			b, errB := flt.Match(in)
			if a != b || (errA == nil) != (errB == nil) {
				t.Fatalf("%s: %v %v, then %v %v", flt, a, errA, b, errB)
			}
			if errA != nil && a {
				t.Fatalf("%s: a match with an error: %v", flt, errA)
			}
		}
	})
}
