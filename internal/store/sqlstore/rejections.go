package sqlstore

import (
	"strconv"
	"strings"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// RejectionsQuery is the page query of ListRejections in dialect dl: the
// rejections filter f selects, below cursor (0 for the first page), newest
// first, at most limit+1 rows of what ScanRejection reads.
func RejectionsQuery(dl Dialect, f store.RejectionFilter, cursor int64, limit int) (string, []any) {
	w := NewWhere(dl)
	w.AddString("source = ?", f.Source)
	w.AddString("reason = ?", f.Reason)
	w.AddTime("at >= ?", f.Since)
	w.AddTime("at < ?", f.Until)
	if cursor > 0 {
		w.Add("id < ?", cursor)
	}
	if f.Q != "" {
		// q is a whole value, the source's name or one of the ids: the
		// needle TAB q LF is found only between a TAB and a LF of
		// TAB source LF name TAB value LF … (EncodeRequestIDs).
		find := `instr(char(9) || source || char(10) || coalesce(ids, ''), ?) > 0`
		if dl.Numbered {
			find = `strpos(chr(9) || source || chr(10) || coalesce(ids, ''), ?) > 0`
		}
		w.Add(find, "\t"+f.Q+"\n")
	}
	return `SELECT id, at, source, known, reason, status, message, remote_addr, user_agent,
		body_size, coalesce(body_sha256, ''), header_count, header_bytes, coalesce(ids, '') FROM rejections` + w.String() +
		` ORDER BY id DESC LIMIT ` + strconv.Itoa(limit+1), w.Args()
}

// ScanRejection scans one row of RejectionsQuery.
func ScanRejection(sc Scanner) (anyhook.Rejection, error) {
	var r anyhook.Rejection
	var ids string
	err := sc.Scan(&r.ID, Time(&r.At), &r.Source, &r.KnownSource, &r.Reason, &r.Status, &r.Message, &r.RemoteAddr, &r.UserAgent,
		&r.BodySize, &r.BodySHA256, &r.HeaderCount, &r.HeaderBytes, &ids)
	r.IDs = DecodeRequestIDs(ids)
	return r, err
}

// EncodeRequestIDs is the stored form of a rejection's ids: a line
// "name TAB value LF" each (a TAB or LF inside either is stored as '?'),
// nil (NULL) for none.
func EncodeRequestIDs(ids []anyhook.RequestID) any {
	if len(ids) == 0 {
		return nil
	}
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(noSeparators.Replace(id.Name))
		b.WriteByte('\t')
		b.WriteString(noSeparators.Replace(id.Value))
		b.WriteByte('\n')
	}
	return b.String()
}

var noSeparators = strings.NewReplacer("\t", "?", "\n", "?")

// DecodeRequestIDs reads what EncodeRequestIDs stored.
func DecodeRequestIDs(s string) []anyhook.RequestID {
	var out []anyhook.RequestID
	for line := range strings.SplitSeq(s, "\n") {
		if name, value, ok := strings.Cut(line, "\t"); ok {
			out = append(out, anyhook.RequestID{Name: name, Value: value})
		}
	}
	return out
}

// InsertRejection is the statement that records one rejection in dialect
// dl, with RejectionArgs as its parameters.
func InsertRejection(dl Dialect) string {
	return dl.Rebind(`INSERT INTO rejections (at, source, known, reason, status, message, remote_addr, user_agent,
		body_size, body_sha256, header_count, header_bytes, ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
}

// RejectionArgs are the parameters of InsertRejection for r.
func RejectionArgs(dl Dialect, r anyhook.Rejection) []any {
	return []any{dl.Time(r.At), r.Source, r.KnownSource, r.Reason, r.Status, r.Message, r.RemoteAddr, r.UserAgent,
		r.BodySize, Nullable(r.BodySHA256), r.HeaderCount, r.HeaderBytes, EncodeRequestIDs(r.IDs)}
}

// Stmt is a statement with its parameters.
type Stmt struct {
	SQL  string
	Args []any
}

// PruneRejections are the statements of PruneRejections in dialect dl:
// for known and unknown sources apart, delete all but the newest keep
// records (all of them for keep <= 0).
func PruneRejections(dl Dialect, keepKnown, keepUnknown int) []Stmt {
	var out []Stmt
	for _, k := range []struct {
		known bool
		keep  int
	}{{true, keepKnown}, {false, keepUnknown}} {
		if k.keep <= 0 {
			out = append(out, Stmt{dl.Rebind(`DELETE FROM rejections WHERE known = ?`), []any{k.known}})
			continue
		}
		out = append(out, Stmt{dl.Rebind(pruneRejectionsSQL), []any{k.known, k.known, k.keep - 1}})
	}
	return out
}

// ListRejections is store.RejectionLog's ListRejections of a store in
// dialect dl whose query runs a RejectionsQuery and scans its rows with
// ScanRejection.
func ListRejections(dl Dialect, f store.RejectionFilter, query func(q string, args []any) ([]anyhook.Rejection, error)) ([]anyhook.Rejection, string, error) {
	cursor, err := store.RejectionCursor(f.Cursor)
	if err != nil {
		return nil, "", err
	}
	limit := store.PageLimit(f.Limit)
	q, args := RejectionsQuery(dl, f, cursor, limit)
	out, err := query(q, args)
	if err != nil {
		return nil, "", store.Unavailable("list rejections", err)
	}
	out, next := store.Page(out, limit, func(r anyhook.Rejection) string { return strconv.FormatInt(r.ID, 10) })
	return out, next, nil
}

// pruneRejectionsSQL deletes, of the rejections whose known column is the
// first parameter (repeated as the second), all but the latest (the third
// parameter) rows. The same text serves both dialects once its
// placeholders are written in them.
const pruneRejectionsSQL = `DELETE FROM rejections WHERE known = ? AND id < (SELECT id FROM rejections WHERE known = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`
