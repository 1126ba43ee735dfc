package store

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestHeaderDiff(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 300)
	orig := http.Header{"A": {"1"}, "B": {"2"}, "Long": {long}, "Multi": {"a", "b"}}
	for _, tc := range []struct {
		name    string
		arrival http.Header
		cut     bool
		want    []HeaderChange
	}{
		{"same", http.Header{"A": {"1"}, "B": {"2"}, "Long": {long}, "Multi": {"a", "b"}}, false, nil},
		{"changed, added, missing", http.Header{"A": {"9"}, "Long": {long}, "Multi": {"a", "b"}, "New": {"n"}}, false,
			[]HeaderChange{{"A", []string{"1"}, []string{"9"}}, {"B", []string{"2"}, nil}, {"New", nil, []string{"n"}}}},
		{"value order counts", http.Header{"A": {"1"}, "B": {"2"}, "Long": {long}, "Multi": {"b", "a"}}, false,
			[]HeaderChange{{"Multi", []string{"a", "b"}, []string{"b", "a"}}}},
		{"cut: a shortened value and a header left out are no difference", http.Header{"A": {"1"}, "Long": {long[:cutValue]}, "Multi": {"a", "b"}}, true, nil},
		{"cut: other values still differ", http.Header{"A": {"2"}, "Long": {long[:cutValue]}}, true,
			[]HeaderChange{{"A", []string{"1"}, []string{"2"}}}},
		{"not cut: a shortened value differs", http.Header{"A": {"1"}, "B": {"2"}, "Long": {long[:cutValue]}, "Multi": {"a", "b"}}, false,
			[]HeaderChange{{"Long", []string{long}, []string{long[:cutValue]}}}},
	} {
		if got := HeaderDiff(orig, tc.arrival, tc.cut); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: HeaderDiff = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestArrivalHeader(t *testing.T) {
	t.Parallel()
	small := http.Header{"A": {"1"}}
	if b, cut := ArrivalHeader(small); cut || string(b) != "A: 1\r\n" {
		t.Errorf("small: %q, %v", b, cut)
	}
	big := http.Header{"A": {strings.Repeat("a", 20000)}, "B": {"2"}}
	b, cut := ArrivalHeader(big)
	h, err := DecodeHeader(b)
	if !cut || err != nil || len(h.Get("A")) != cutValue || h.Get("B") != "2" {
		t.Errorf("one long value: cut %v, %v, A %d bytes, B %q", cut, err, len(h.Get("A")), h.Get("B"))
	}
	many := http.Header{}
	for i := range 100 {
		many[strings.Repeat("N", 3)+string(rune('A'+i%26))+string(rune('A'+i/26))] = []string{strings.Repeat("v", 400)}
	}
	b, cut = ArrivalHeader(many)
	if !cut || len(b) > MaxArrivalHeader || len(b) < MaxArrivalHeader-300 {
		t.Errorf("many headers: cut %v, %d bytes", cut, len(b))
	}
	bad := http.Header{"A": {"1"}, "B:": {"2"}}
	if b, cut := ArrivalHeader(bad); !cut || string(b) != "A: 1\r\n" {
		t.Errorf("unstorable name: %q, %v", b, cut)
	}
}
