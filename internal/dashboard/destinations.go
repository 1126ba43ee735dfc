package dashboard

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
)

// GET /destinations
func (d *Dashboard) destinations(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query(), nil); err != nil {
		return err
	}
	rows, err := d.destRows(r)
	if err != nil {
		return err
	}
	qs, err := d.opt.Store.QueueStats(r.Context(), d.dests)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].Depth = qs.Depth[rows[i].Name]
		rows[i].LastDelivered = qs.LastDelivered[rows[i].Name]
	}
	orphans, err := d.orphanRows(r)
	if err != nil {
		return err
	}
	rows = append(rows, orphans...)
	d.render(w, r, http.StatusOK, "destinations", "Destinations", struct {
		Rows     []destRow
		Statuses []anyhook.DeliveryStatus
		CanAct   bool
	}{rows, store.UnfinishedStatuses, canAct(r)})
	return nil
}

// destRow is one destination's health.
type destRow struct {
	Name          string
	Kind          string // the destination's type, "" for http
	Orphaned      bool   // not in the config, with unfinished deliveries
	Sources       []string
	Paused        bool           // by a person
	Breaker       *store.Breaker // tripped (auto_pause); nil when not
	Health        delivery.Health
	HasHealth     bool
	Depth         map[anyhook.DeliveryStatus]int
	LastDelivered time.Time
	Delivered     int // over the overview's window
	Dead          int
}

// Count is the number of the destination's deliveries in status s.
func (r destRow) Count(s string) int { return r.Depth[anyhook.DeliveryStatus(s)] }

// destRows lists the configured destinations with pause state and the
// engine's view of their health.
func (d *Dashboard) destRows(r *http.Request) ([]destRow, error) {
	paused, err := d.opt.Store.Paused(r.Context())
	if err != nil {
		return nil, err
	}
	breakers, err := d.opt.Store.Breakers(r.Context())
	if err != nil {
		return nil, err
	}
	var health map[string]delivery.Health
	if d.opt.Health != nil {
		health = d.opt.Health()
	}
	rows := make([]destRow, 0, len(d.dests))
	for _, name := range d.dests {
		row := destRow{Name: name, Paused: paused[name]}
		if k := d.opt.Kinds[name]; k != "http" {
			row.Kind = k
		}
		if b, ok := breakers[name]; ok {
			row.Breaker = &b
		}
		row.Health, row.HasHealth = health[name]
		for _, src := range d.sources {
			if slices.Contains(d.opt.Sources[src], name) {
				row.Sources = append(row.Sources, src)
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// orphanRows are the destinations the config does not name that still have
// unfinished deliveries (removed from the config, or not added yet in a
// rolling change): their deliveries wait untouched until a config names
// the destination again.
func (d *Dashboard) orphanRows(r *http.Request) ([]destRow, error) {
	qs, err := d.opt.Store.QueueStats(r.Context(), nil)
	if err != nil {
		return nil, err
	}
	var rows []destRow
	for _, name := range slices.Sorted(maps.Keys(qs.Depth)) {
		if !slices.Contains(d.dests, name) {
			rows = append(rows, destRow{Name: name, Orphaned: true, Depth: qs.Depth[name]})
		}
	}
	return rows, nil
}
