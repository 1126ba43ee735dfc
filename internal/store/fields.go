package store

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/anyhook/anyhook"
)

// Bounds, in bytes, on the fields of an event that are read from the
// request. The dedup key, the content key and the object are indexed with
// the source (the dedup and content keys' unique indexes, the version
// marks' primary key, the per-object index); a PostgreSQL btree holds an
// index row of at most 2,704 bytes (8 KiB pages), so 1 KiB leaves room
// for any source name short of 1.5 KiB. Type and version are not indexed;
// their bounds are generous for every provider (the longest type, a
// GitHub event and action, is under 60 bytes; a version is an integer or
// an RFC 3339 time).
const (
	MaxDedupKey = 1024
	MaxObject   = 1024
	MaxType     = 256
	MaxVersion  = 256
)

// FieldError is a field of an event that the stores refuse, identically:
// not valid UTF-8, holding a NUL byte (PostgreSQL's text refuses both;
// SQLite would keep them), or over its bound. Its text names the field
// and what is wrong, never the value, so it may be shown to the sender.
// It wraps anyhook.ErrInvalid.
type FieldError struct {
	Field   string // "event id", "event type", "ordering object", …
	Problem string // "is 3000 bytes, at most 1024", "holds a NUL byte", …
}

func (e *FieldError) Error() string { return "the " + e.Field + " " + e.Problem }

// Unwrap makes a FieldError an anyhook.ErrInvalid.
func (e *FieldError) Unwrap() error { return anyhook.ErrInvalid }

// CheckEvent says whether ne's fields read from the request can be
// stored as they are by every store: its dedup key, content key, type,
// ordering object and version and its request path must be valid UTF-8
// without NUL bytes, the first five within their bounds (Max*), and the
// dedup key, type, object and version without control characters
// (controlProblem). It
// returns nil or a *FieldError for the first field that cannot. Ingest
// refuses such an event before it reaches a store; both stores refuse it
// too (IngestValid), so that what a store keeps never depends on which one
// it is.
func CheckEvent(ne *NewEvent) error {
	ev := &ne.Event
	for _, f := range [...]struct {
		name, value string
		max         int
		shown       bool // logged, listed and printed as it is
	}{
		{"event id", ev.DedupKey, MaxDedupKey, true},
		{"content key", ne.ContentKey, MaxDedupKey, false},
		{"event type", ev.Type, MaxType, true},
		{"ordering object", ev.Object, MaxObject, true},
		{"ordering version", ev.Version, MaxVersion, true},
		{"request path", ev.Path, 0, false},
	} {
		if f.max > 0 && len(f.value) > f.max {
			return &FieldError{f.name, "is " + strconv.Itoa(len(f.value)) + " bytes, at most " + strconv.Itoa(f.max)}
		}
		if p := TextProblem(f.value); p != "" {
			return &FieldError{f.name, p}
		}
		if p := controlProblem(f.value); p != "" && f.shown {
			return &FieldError{f.name, p}
		}
	}
	return nil
}

// controlProblem says which control character s holds, or "" when none:
// C0 and C1 controls and DEL (a newline forges a log line, an escape
// sequence drives the terminal that prints a CLI table), the line and
// paragraph separators, and the Unicode bidirectional controls (which
// make a value read as another). Fields that are shown as they are —
// in logs, the dashboard, the CLI, X-AnyHook-* headers — never hold one.
func controlProblem(s string) string {
	for _, r := range s {
		if isControl(r) {
			return fmt.Sprintf("holds a control character (U+%04X)", r)
		}
	}
	return ""
}

func isControl(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp, unicode.Bidi_Control)
}

// TextProblem says what keeps s from being text that both stores keep
// alike ("is not valid UTF-8", "holds a NUL byte"), or "" when nothing
// does. No id, name or key in either store holds such bytes, so a lookup
// by one finds nothing; PostgreSQL fails the lookup instead, so callers
// refuse such a value first.
func TextProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "holds a NUL byte"
	}
	return ""
}

// Text makes s storable in a text column alike on both stores: bytes that
// are not UTF-8 and NUL bytes become U+FFFD. For messages that are only
// shown (an attempt's error, a backfill's), which must never fail the
// write that records them, and which a person reads as text anyway.
func Text(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// IngestValid is how both stores' Ingest begins: an item that CheckEvent
// refuses gets its error (wrapping anyhook.ErrInvalid) as its result and
// never reaches SQL; the others go to ingest, in their order, and their
// results are put back in place. When every item is valid it calls ingest
// with evs itself.
func IngestValid(evs []NewEvent, ingest func([]NewEvent) ([]IngestResult, error)) ([]IngestResult, error) {
	var bad map[int]error
	for i := range evs {
		if err := CheckEvent(&evs[i]); err != nil {
			if bad == nil {
				bad = map[int]error{}
			}
			bad[i] = err
		}
	}
	if bad == nil {
		return ingest(evs)
	}
	good := make([]NewEvent, 0, len(evs)-len(bad))
	for i := range evs {
		if bad[i] == nil {
			good = append(good, evs[i])
		}
	}
	var got []IngestResult
	if len(good) > 0 {
		var err error
		if got, err = ingest(good); err != nil {
			return nil, err
		}
		if len(got) != len(good) {
			return got, nil // short: the caller reports it, as it would for the whole batch
		}
	}
	res := make([]IngestResult, len(evs))
	for i := range evs {
		if err := bad[i]; err != nil {
			res[i] = IngestResult{Err: fmt.Errorf("event %s: %w", evs[i].Event.ID, err)}
			continue
		}
		res[i], got = got[0], got[1:]
	}
	return res, nil
}
