package dashboard

import (
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// arrivedView is every request that carried an event: the original, then
// the duplicates the store itemised.
type arrivedView struct {
	Count    int64 // requests: 1 + duplicates
	Unlisted int64 // duplicates counted but not itemised
	Differed int   // itemised duplicates whose body was not the event's
	Rows     []arrivalRow
}

type arrivalRow struct {
	Number     int // 1: the original
	Original   bool
	ReceivedAt time.Time
	When       string // ReceivedAt to the millisecond: retries come close together
	RemoteAddr string
	Changes    []store.HeaderChange // headers that differ from the original's
	Cut        bool                 // the duplicate's headers were cut to fit
	BodySHA256 string               // set when the duplicate's body differed: its hash
}

func arrivedOf(ev anyhook.Event) arrivedView {
	v := arrivedView{Count: 1 + ev.Duplicates, Unlisted: max(0, ev.Duplicates-int64(len(ev.Arrivals)))}
	v.Rows = append(v.Rows, arrivalRow{Number: 1, Original: true, ReceivedAt: ev.ReceivedAt, When: millis(ev.ReceivedAt), RemoteAddr: ev.RemoteAddr})
	for _, a := range ev.Arrivals {
		v.Rows = append(v.Rows, arrivalRow{Number: 1 + a.Seq, ReceivedAt: a.ReceivedAt, When: millis(a.ReceivedAt), RemoteAddr: a.RemoteAddr,
			Changes: store.HeaderDiff(ev.Header, a.Header, a.HeaderCut), Cut: a.HeaderCut, BodySHA256: a.BodySHA256})
		if a.BodySHA256 != "" {
			v.Differed++
		}
	}
	return v
}

func millis(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") }
