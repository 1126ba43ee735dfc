package bench

import (
	"strings"
	"testing"
)

// TestFillReportSize: the text report gives the store's size per recorded
// event and what its percentiles are of, so that a reader can check the
// docs' sizing table against it.
func TestFillReportSize(t *testing.T) {
	var b strings.Builder
	(&FillReport{Database: "sqlite", Added: 1000, Events: 980, StoreBytes: 3_030_000, Repeat: 3}).write(&b, false)
	for _, want := range []string{"980 events recorded (1000 added", "disk: 0.00 GB", "(3.09 KB per recorded event)", "of 3 warm requests"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	(&FillReport{Database: "postgres", Added: 10, Events: 10, Repeat: 3}).write(&b, false)
	if strings.Contains(b.String(), "disk:") {
		t.Errorf("a PostgreSQL report claims a file size:\n%s", b.String())
	}
}
