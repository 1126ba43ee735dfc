package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

type statusCount struct {
	Status anyhook.DeliveryStatus
	Count  int
}

type overviewData struct {
	Window        string
	Received      int
	Delivered     int
	Dead          int
	Failed        int    // attempts that got no 2xx
	Replayed      int    // replay deliveries created
	IngestRate    string // per minute
	DeliveryRate  string
	SuccessRatio  string
	Queue         []statusCount
	OldestPending string
	Stale         int // stale events received in the window
	Skipped       int // of them, skipped (stale: skip)
	IngestChart   chart
	DeliveryChart chart
	Destinations  []destRow
	Ledger        *LedgerStatus
	Shed          int64 // requests shed since this process started
	ShowShed      bool
	// Incidents are the unresolved ones: the page leads with them.
	Incidents []incidentRow
}

// GET /
func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query(), nil); err != nil {
		return err
	}
	data := overviewData{Window: "last hour", SuccessRatio: "—", OldestPending: "—", IngestRate: "—", DeliveryRate: "—"}
	rows, err := d.destRows(r)
	if err != nil {
		return err
	}
	if data.Incidents, err = d.openIncidents(r.Context()); err != nil {
		return err
	}
	if d.opt.Shed != nil {
		data.Shed, data.ShowShed = d.opt.Shed(), true
	}
	if d.opt.Ledger != nil {
		ls, err := d.opt.Ledger(r.Context())
		if err != nil {
			return err
		}
		data.Ledger = &ls
	}
	act, err := d.opt.Store.Activity(r.Context(), store.ActivityQuery{Window: time.Hour, Bucket: time.Minute, Destinations: d.dests})
	if err != nil {
		return err
	}
	qs, err := d.opt.Store.QueueStats(r.Context(), d.dests)
	if err != nil {
		return err
	}
	n := len(act.Received)
	delivered, dead := store.Merge(act.Delivered, n), store.Merge(act.Dead, n)
	data.Received, data.Delivered, data.Dead = store.Sum(act.Received), store.Sum(delivered), store.Sum(dead)
	data.Stale, data.Skipped = act.Stale, act.Skipped
	data.Failed, data.Replayed = store.Sum(store.Merge(act.Failed, n)), store.Sum(store.Merge(act.Replayed, n))
	minutes := float64(n) * act.Bucket.Minutes()
	data.IngestRate = fmt.Sprintf("%.1f", float64(data.Received)/minutes)
	data.DeliveryRate = fmt.Sprintf("%.1f", float64(data.Delivered+data.Dead)/minutes)
	if fin := data.Delivered + data.Dead; fin > 0 {
		data.SuccessRatio = fmt.Sprintf("%.1f%%", 100*float64(data.Delivered)/float64(fin))
	}
	for _, st := range store.UnfinishedStatuses {
		data.Queue = append(data.Queue, statusCount{st, qs.Total(st)})
	}
	if !qs.OldestPending.IsZero() {
		data.OldestPending = human(qs.OldestPendingAge())
	}
	data.IngestChart = newChart("events received per minute", act.Start, act.Bucket,
		[]chartSeries{{Name: "received", Class: "s-received"}}, [][]int{act.Received})
	data.DeliveryChart = newChart("deliveries finished per minute", act.Start, act.Bucket,
		[]chartSeries{{Name: "delivered", Class: "s-delivered"}, {Name: "dead", Class: "s-dead"}}, [][]int{delivered, dead})
	for i := range rows {
		rows[i].Depth = qs.Depth[rows[i].Name]
		rows[i].LastDelivered = qs.LastDelivered[rows[i].Name]
		rows[i].Delivered = store.Sum(act.Delivered[rows[i].Name])
		rows[i].Dead = store.Sum(act.Dead[rows[i].Name])
	}
	orphans, err := d.orphanRows(r)
	if err != nil {
		return err
	}
	data.Destinations = append(rows, orphans...)
	d.render(w, r, http.StatusOK, "overview", "Overview", data)
	return nil
}
