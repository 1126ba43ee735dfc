package admin

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/store"
)

// rejectionJSON is one refused request of the rejection log: sizes, a hash
// and the answer, never a body or a secret.
type rejectionJSON struct {
	ID          int64     `json:"id"`
	At          time.Time `json:"at"`
	Source      string    `json:"source"`
	KnownSource bool      `json:"known_source"`
	Reason      string    `json:"reason"`
	Status      int       `json:"status"`
	Message     string    `json:"message"`
	RemoteAddr  string    `json:"remote_addr"`
	UserAgent   string    `json:"user_agent"`
	BodySize    int64     `json:"body_size"`
	BodySHA256  string    `json:"body_sha256"`
	HeaderCount int       `json:"header_count"`
	HeaderBytes int       `json:"header_bytes"`
	// IDs are the values that name the request without being secret (the
	// provider's delivery id headers, its signature's timestamp, the
	// event id of a body that was read), by where they were read.
	IDs map[string]string `json:"ids"`
	// DidYouMean is, for an unknown source, the configured one whose name
	// is closest, when one is close.
	DidYouMean string `json:"did_you_mean,omitempty"`
}

// GET /api/rejections?source=&reason=&q=&since=&until=&limit=&cursor=
func (a *API) listRejections(w http.ResponseWriter, r *http.Request) error {
	q := a.query(r)
	q.only("source", "reason", "q", "since", "until", "limit", "cursor")
	f := store.RejectionFilter{
		Source: q.str("source"),
		Reason: q.str("reason"),
		Q:      q.str("q"),
		Since:  q.time("since"),
		Until:  q.time("until"),
		Limit:  q.limit(),
		Cursor: q.str("cursor"),
	}
	if f.Reason != "" && !anyhook.ValidRejectReason(f.Reason) {
		q.fail(badParam("reason", "unknown reason %q (want unknown_source, rejected_signature, invalid, too_large or rate_limited)", f.Reason))
	}
	if _, err := store.RejectionCursor(f.Cursor); err != nil {
		q.fail(badParam("cursor", "%q is not a next_cursor of this list", f.Cursor))
	}
	q.window(f.Since, f.Until)
	if q.err != nil {
		return q.err
	}
	rs, next, err := a.store.ListRejections(r.Context(), f)
	if err != nil {
		return err
	}
	out := listJSON[rejectionJSON]{Items: make([]rejectionJSON, 0, len(rs)), NextCursor: next}
	names := slices.Collect(maps.Keys(a.sources))
	for _, x := range rs {
		item := rejectionJSON{
			ID: x.ID, At: utc(x.At), Source: x.Source, KnownSource: x.KnownSource, Reason: x.Reason, Status: x.Status,
			Message: x.Message, RemoteAddr: x.RemoteAddr, UserAgent: x.UserAgent, BodySize: x.BodySize,
			BodySHA256: x.BodySHA256, HeaderCount: x.HeaderCount, HeaderBytes: x.HeaderBytes, IDs: map[string]string{},
		}
		for _, id := range x.IDs {
			item.IDs[id.Name] = id.Value
		}
		if x.Reason == anyhook.RejectUnknownSource {
			item.DidYouMean = cli.Suggest(x.Source, names)
		}
		out.Items = append(out.Items, item)
	}
	return writeJSON(w, http.StatusOK, out)
}
