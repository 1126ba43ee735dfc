package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/anyhook/anyhook"
)

// RejectionReader lists the rejection log: the webhook requests ingest
// refused (internal/rejectlog writes them).
type RejectionReader interface {
	// ListRejections lists rejections newest first.
	ListRejections(ctx context.Context, f RejectionFilter) ([]anyhook.Rejection, string, error)
}

// RejectionLog is the part of Store that keeps a bounded table of refused
// requests, apart from the event tables (never read by ingest, never used
// for dedup).
type RejectionLog interface {
	RejectionReader
	// RecordRejections appends rs in one transaction; the store assigns
	// their ids, increasing.
	RecordRejections(ctx context.Context, rs []anyhook.Rejection) error
	// PruneRejections deletes all but the latest keepKnown rejections of
	// configured sources and, apart, the latest keepUnknown of unknown
	// source names, and returns how many it deleted.
	PruneRejections(ctx context.Context, keepKnown, keepUnknown int) (int64, error)
}

// RejectionFilter selects rejections, newest first.
type RejectionFilter struct {
	Source string // the source name as requested, exactly
	Reason string // one of the anyhook.Reject* reasons
	// Q matches a rejection whose source name, or one of whose IDs'
	// values, is exactly Q.
	Q      string
	Since  time.Time // at or after
	Until  time.Time // before
	Limit  int       // 0 = 50; at most 500
	Cursor string    // from a previous page
}

// RejectionCursor reads the cursor of a rejection list: the id of the
// last rejection of the previous page ("" is the first page, 0).
func RejectionCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("cursor %q: not a rejection list cursor: %w", s, anyhook.ErrInvalid)
	}
	return n, nil
}

// MaxRejectionHint bounds the count RejectionHint gives.
const MaxRejectionHint = 100

// RejectionHint counts, up to MaxRejectionHint, the refused requests (of
// source, when set) that q names by their source or one of their ids:
// where an event that a search by q did not find may have gone.
func RejectionHint(ctx context.Context, r RejectionReader, source, q string) (int, error) {
	rs, _, err := r.ListRejections(ctx, RejectionFilter{Q: q, Source: source, Limit: MaxRejectionHint})
	return len(rs), err
}
