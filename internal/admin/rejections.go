package admin

import (
	"net/http"
	"time"

	"github.com/anyhook/anyhook"
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
}

// GET /api/rejections?source=&reason=&since=&until=&limit=&cursor=
func (a *API) listRejections(w http.ResponseWriter, r *http.Request) error {
	q := a.query(r)
	q.only("source", "reason", "since", "until", "limit", "cursor")
	f := store.RejectionFilter{
		Source: q.str("source"),
		Reason: q.str("reason"),
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
	for _, x := range rs {
		out.Items = append(out.Items, rejectionJSON{
			ID: x.ID, At: utc(x.At), Source: x.Source, KnownSource: x.KnownSource, Reason: x.Reason, Status: x.Status,
			Message: x.Message, RemoteAddr: x.RemoteAddr, UserAgent: x.UserAgent, BodySize: x.BodySize,
			BodySHA256: x.BodySHA256, HeaderCount: x.HeaderCount, HeaderBytes: x.HeaderBytes,
		})
	}
	return writeJSON(w, http.StatusOK, out)
}
