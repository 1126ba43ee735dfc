package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/store"
)

// rejectReasons are the reasons the page filters by, in the order shown.
var rejectReasons = []string{anyhook.RejectSignature, anyhook.RejectUnknownSource, anyhook.RejectInvalid,
	anyhook.RejectTooLarge, anyhook.RejectRateLimited}

type rejectionsData struct {
	Source   string
	Other    bool // Source is not a configured source
	Reason   string
	Q        string // a source name or one of the ids, whole
	Sources  []string
	Reasons  []string
	Rows     []rejectionRow
	NextURL  string
	FirstURL string
	Paged    bool
}

type rejectionRow struct {
	anyhook.Rejection
	When       string // to the millisecond
	Size       string // of the body, "" when not announced
	DidYouMean string // an unknown source's closest configured name
}

// NavKey marks the page in the navigation.
func (rejectionsData) NavKey() string { return "rejections" }

// GET /rejections?source=&reason=&q=&cursor=
func (d *Dashboard) rejections(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	if err := onlyParams(v, nil, "source", "reason", "q", "cursor"); err != nil {
		return err
	}
	f := store.RejectionFilter{
		Source: strings.TrimSpace(v.Get("source")),
		Reason: strings.TrimSpace(v.Get("reason")),
		Q:      strings.TrimSpace(v.Get("q")),
		Cursor: strings.TrimSpace(v.Get("cursor")),
		Limit:  100,
	}
	if f.Reason != "" && !anyhook.ValidRejectReason(f.Reason) {
		return &pageError{http.StatusBadRequest, "unknown reason " + f.Reason}
	}
	data := rejectionsData{Source: f.Source, Reason: f.Reason, Q: f.Q, Sources: d.sources, Reasons: rejectReasons, Paged: f.Cursor != "",
		Other: f.Source != "" && !slices.Contains(d.sources, f.Source)}
	rs, next, err := d.opt.Store.ListRejections(r.Context(), f)
	if err != nil {
		return err
	}
	for _, x := range rs {
		row := rejectionRow{Rejection: x, When: millis(x.At)}
		if x.BodySize >= 0 {
			row.Size = byteSize(x.BodySize)
		}
		if x.Reason == anyhook.RejectUnknownSource {
			row.DidYouMean = cli.Suggest(x.Source, d.sources)
		}
		data.Rows = append(data.Rows, row)
	}
	q := url.Values{}
	if f.Source != "" {
		q.Set("source", f.Source)
	}
	if f.Reason != "" {
		q.Set("reason", f.Reason)
	}
	if f.Q != "" {
		q.Set("q", f.Q)
	}
	data.FirstURL = "/rejections"
	if len(q) > 0 {
		data.FirstURL += "?" + q.Encode()
	}
	if next != "" {
		q.Set("cursor", next)
		data.NextURL = "/rejections?" + q.Encode()
	}
	d.render(w, r, http.StatusOK, "rejections", "Refused requests", data)
	return nil
}

// byteSize writes n bytes for a person (the "size" template helper).
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
