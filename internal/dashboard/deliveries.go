package dashboard

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/store"
)

// queueRow is a delivery with what the queues show beside it.
type queueRow struct {
	anyhook.Delivery
	store.QueueRow
}

// LastError is the latest attempt's outcome in words: its error (the
// HTTP status or the transport error), "" when it had none.
func (r queueRow) LastError() string {
	switch {
	case r.Last.Number == 0:
		return ""
	case r.Last.Error != "":
		return r.Last.Error
	case r.Last.StatusCode != 0 && (r.Last.StatusCode < 200 || r.Last.StatusCode > 299):
		return fmt.Sprintf("HTTP %d", r.Last.StatusCode)
	}
	return ""
}

type deliveriesData struct {
	Status      anyhook.DeliveryStatus
	Destination string
	Dests       []string
	Orphans     []string // destinations not in the config with unfinished deliveries
	Statuses    []anyhook.DeliveryStatus
	Rows        []queueRow
	NextURL     string
	Back        string
	Resolvable  bool // held or dead, and the session may act
	CanAct      bool // the session may act (scope admin)
	Total       int  // of Status (and Destination), when known
	HaveTotal   bool
	// Troubled says, of the destinations "Replay all dead" sends into,
	// those paused or failing: its confirmation names them, and a yes
	// replays all the same (the admin API's force).
	Troubled []string
}

// NavKey marks the dead and held queues in the navigation.
func (d deliveriesData) NavKey() string { return string(d.Status) }

// deliveryHints say where the filters the deliveries list lacks are.
var deliveryHints = map[string]func(string) string{
	"source": func(s string) string {
		return "the events of a source are listed by delivery status at /events?source=" + url.QueryEscape(s) + "&status=dead, and GET /api/deliveries takes source"
	},
	"type": func(t string) string {
		return "the events of a type are listed by delivery status at /events?type=" + url.QueryEscape(t) + "&status=dead"
	},
}

// GET /deliveries?status=&destination=&cursor=
func (d *Dashboard) deliveries(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	if err := onlyParams(v, deliveryHints, "status", "destination", "cursor"); err != nil {
		return err
	}
	f := store.DeliveryFilter{
		Status:      anyhook.DeliveryStatus(strings.TrimSpace(v.Get("status"))),
		Destination: strings.TrimSpace(v.Get("destination")),
		Cursor:      strings.TrimSpace(v.Get("cursor")),
		Limit:       100,
	}
	if f.Status == "" {
		f.Status = anyhook.StatusHeld
	}
	if !f.Status.Valid() {
		return &pageError{http.StatusBadRequest, fmt.Sprintf("unknown status %q", f.Status)}
	}
	ds, next, err := d.opt.Store.ListDeliveries(r.Context(), f)
	if err != nil {
		return err
	}
	if err := store.FillWaitsBehind(r.Context(), d.opt.Store, ds, d.inOrder); err != nil {
		return err
	}
	data := deliveriesData{Status: f.Status, Destination: f.Destination, Dests: d.dests, Statuses: statusOrder,
		Back: r.URL.RequestURI(), Resolvable: canAct(r) && (f.Status == anyhook.StatusHeld || f.Status == anyhook.StatusDead), CanAct: canAct(r)}
	data.Rows = make([]queueRow, len(ds))
	ids := make([]string, len(ds))
	for i, dl := range ds {
		data.Rows[i].Delivery, ids[i] = dl, dl.ID
	}
	if len(ids) > 0 {
		extra, err := d.opt.Store.QueueRows(r.Context(), ids)
		if err != nil {
			return err
		}
		for i := range data.Rows {
			data.Rows[i].QueueRow = extra[data.Rows[i].ID]
		}
	}
	// Every destination's, as the list below: also those the config no
	// longer names (orphaned), which the filter offers too.
	qs, err := d.opt.Store.QueueStats(r.Context(), nil)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(qs.Depth)) {
		if !slices.Contains(d.dests, name) {
			data.Orphans = append(data.Orphans, name)
		}
	}
	if slices.Contains(store.UnfinishedStatuses, f.Status) {
		data.Total = qs.Total(f.Status)
		if f.Destination != "" {
			data.Total = qs.Depth[f.Destination][f.Status]
		}
		data.HaveTotal = true
	}
	if f.Status == anyhook.StatusDead && len(ds) > 0 {
		var dead []string
		for _, name := range slices.Sorted(maps.Keys(qs.Depth)) {
			if qs.Depth[name][anyhook.StatusDead] > 0 && (f.Destination == "" || name == f.Destination) {
				dead = append(dead, name)
			}
		}
		ts, err := store.Trouble(r.Context(), d.opt.Store, dead, admin.Failing(d.opt.Health, d.opt.Store))
		if err != nil {
			return err
		}
		for _, t := range ts {
			data.Troubled = append(data.Troubled, t.String())
		}
	}
	if f.Destination != "" && !slices.Contains(d.dests, f.Destination) && !slices.Contains(data.Orphans, f.Destination) {
		data.Orphans = append(data.Orphans, f.Destination) // keep the filter showing what was asked
	}
	if next != "" {
		q := url.Values{"status": {string(f.Status)}, "cursor": {next}}
		if f.Destination != "" {
			q.Set("destination", f.Destination)
		}
		data.NextURL = "/deliveries?" + q.Encode()
	}
	title := map[anyhook.DeliveryStatus]string{anyhook.StatusDead: "Dead", anyhook.StatusHeld: "Held"}[f.Status]
	if title == "" {
		title = strings.ToUpper(string(f.Status[:1])) + string(f.Status[1:])
	}
	d.render(w, r, http.StatusOK, "deliveries", title+" deliveries", data)
	return nil
}
