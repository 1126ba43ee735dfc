package admin

import (
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// verificationJSON is how an event was authenticated: the method
// (signature, token, none, fetched; unknown for events recorded before
// AnyHook kept it), the scheme, and the index of the secret that matched
// in the source's secrets list (never the secret).
type verificationJSON struct {
	Method      string `json:"method"`
	Scheme      string `json:"scheme"`
	SecretIndex *int   `json:"secret_index,omitempty"`
}

func toVerification(v anyhook.Verification) verificationJSON {
	out := verificationJSON{Method: v.Method, Scheme: v.Scheme}
	if out.Method == "" {
		out.Method = "unknown"
	}
	if v.Method != "" && v.Secret >= 0 {
		i := v.Secret
		out.SecretIndex = &i
	}
	return out
}

// arrivalsJSON is every request that carried an event: the original and
// its duplicates, the first store.MaxArrivals of which are itemised.
type arrivalsJSON struct {
	Count    int64         `json:"count"`    // requests: 1 + duplicates
	Unlisted int64         `json:"unlisted"` // duplicates counted but not itemised
	Items    []arrivalJSON `json:"items"`
}

type arrivalJSON struct {
	Number     int       `json:"number"` // 1: the original request
	Original   bool      `json:"original"`
	ReceivedAt time.Time `json:"received_at"`
	RemoteAddr string    `json:"remote_addr"`
	// ChangedHeaders are the headers whose values differ from the
	// original request's (empty for the original).
	ChangedHeaders []headerChangeJSON `json:"changed_headers"`
	// HeadersCut: this duplicate's headers were cut to fit the stored
	// bound, so a header left out or shortened is not listed.
	HeadersCut bool `json:"headers_cut,omitzero"`
	// BodySHA256 is set when this duplicate's body was not the event's
	// (the same id, another payload, dropped): its hex SHA-256.
	BodySHA256 string `json:"body_sha256,omitempty"`
}

type headerChangeJSON struct {
	Name     string   `json:"name"`
	Original []string `json:"original"` // [] when the original lacked it
	Value    []string `json:"value"`    // [] when this arrival lacked it
}

func toArrivals(ev anyhook.Event) *arrivalsJSON {
	out := &arrivalsJSON{Count: 1 + ev.Duplicates, Unlisted: max(0, ev.Duplicates-int64(len(ev.Arrivals)))}
	out.Items = append(out.Items, arrivalJSON{Number: 1, Original: true, ReceivedAt: utc(ev.ReceivedAt),
		RemoteAddr: ev.RemoteAddr, ChangedHeaders: []headerChangeJSON{}})
	for _, a := range ev.Arrivals {
		item := arrivalJSON{Number: 1 + a.Seq, ReceivedAt: utc(a.ReceivedAt), RemoteAddr: a.RemoteAddr,
			ChangedHeaders: []headerChangeJSON{}, HeadersCut: a.HeaderCut, BodySHA256: a.BodySHA256}
		for _, c := range store.HeaderDiff(ev.Header, a.Header, a.HeaderCut) {
			item.ChangedHeaders = append(item.ChangedHeaders, headerChangeJSON{Name: c.Name, Original: nonNilStrings(c.Original), Value: nonNilStrings(c.Arrival)})
		}
		out.Items = append(out.Items, item)
	}
	return out
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
