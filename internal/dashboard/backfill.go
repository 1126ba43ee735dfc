package dashboard

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/anyhook/anyhook/internal/backfill"
)

// sourceRow is one source on the sources page, with its latest backfill.
type sourceRow struct {
	Name         string
	Destinations []string
	Backfill     *backfill.Job // nil: none ever started (by any process on the database)
	// NoBackfill says why the source cannot be backfilled ("": it can).
	NoBackfill string
	// Unknown says why its latest backfill cannot be told ("": it can),
	// say the database did not answer.
	Unknown string
}

// GET /sources (sourcesPage): each source, a backfill button, and the latest backfill
// as the admin API reports it.
func (d *Dashboard) sourcesPage(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query(), nil); err != nil {
		return err
	}
	var rows []sourceRow
	running := false
	for _, name := range slices.Sorted(maps.Keys(d.opt.Sources)) {
		row := sourceRow{Name: name, Destinations: d.opt.Sources[name], NoBackfill: "backfill is not available in this gateway"}
		if d.opt.CanBackfill != nil {
			row.NoBackfill = ""
			if err := d.opt.CanBackfill(name); err != nil {
				row.NoBackfill = err.Error()
			}
		}
		var job backfill.Job
		res, err := d.callAPI(r, "GET", "/api/sources/"+url.PathEscape(name)+"/backfill", nil, &job)
		if err != nil {
			return err
		}
		switch {
		case res.ok():
			row.Backfill = &job
			running = running || job.State == backfill.StateRunning
		case res.status != http.StatusNotFound:
			row.Unknown = res.message()
		}
		rows = append(rows, row)
	}
	d.render(w, r, http.StatusOK, "sources", "Sources", struct {
		Rows    []sourceRow
		Running bool
		CanAct  bool
	}{rows, running, canAct(r)})
	return nil
}

// POST /sources/{name}/backfill since=…&dry_run=on: starts a backfill
// through POST /api/sources/{name}/backfill.
func (d *Dashboard) startBackfill(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	name := r.PathValue("name")
	since := strings.TrimSpace(r.PostForm.Get("since"))
	dry := r.PostForm.Get("dry_run") != ""
	res, err := d.callAPI(r, "POST", "/api/sources/"+url.PathEscape(name)+"/backfill",
		map[string]any{"since": since, "dry_run": dry}, nil)
	if err != nil {
		return err
	}
	if !res.ok() {
		setFlash(w, r, true, "Backfill of "+name+" not started: "+res.message())
	} else {
		what := "Backfill"
		if dry {
			what = "Dry run of a backfill"
		}
		setFlash(w, r, false, fmt.Sprintf("%s of %s over the last %s started: it runs in the background; reload this page for its progress.", what, name, since))
	}
	back(w, r, "/sources")
	return nil
}
