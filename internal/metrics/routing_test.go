package metrics

import (
	"context"
	"fmt"
	"testing"

	"github.com/anyhook/anyhook/internal/store"
)

// emptyStats is a store with nothing queued.
type emptyStats struct{ store.StatsReader }

func (emptyStats) QueueStats(context.Context, []string) (store.QueueStats, error) {
	return store.QueueStats{}, nil
}

// TestEventTypesCapped: each source's first MaxTypes types get a series,
// later ones count as other; filter failures are counted per destination.
func TestEventTypesCapped(t *testing.T) {
	t.Parallel()
	m := New(Options{Stats: emptyStats{}, Sources: []string{"gen", "stripe"}, Destinations: []string{"billing"}})
	for i := range MaxTypes + 10 {
		m.EventRecorded("gen", fmt.Sprintf("t%d", i))
	}
	m.EventRecorded("gen", "t0")
	m.EventRecorded("stripe", "invoice.paid")
	m.FilterFailed("billing")
	m.FilterFailed("billing")
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	series := 0
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = mt.GetCounter().GetValue()
			if f.GetName() == "anyhook_ingest_events_total" {
				series++
			}
		}
	}
	if series != MaxTypes+2 {
		t.Errorf("%d series, want %d (%d types of gen, other, one of stripe)", series, MaxTypes+2, MaxTypes)
	}
	for k, want := range map[string]float64{
		"anyhook_ingest_events_total source=gen type=t0":              2,
		"anyhook_ingest_events_total source=gen type=" + OtherType:    10,
		"anyhook_ingest_events_total source=stripe type=invoice.paid": 1,
		"anyhook_filter_errors_total destination=billing":             2,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}
