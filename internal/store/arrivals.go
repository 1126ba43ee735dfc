package store

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/anyhook/anyhook"
)

// MaxArrivals is how many duplicate arrivals of one event a store
// itemises: the first ones. Later duplicates only raise the event's
// duplicate counter.
const MaxArrivals = 20

// MaxArrivalHeader bounds the stored headers of one arrival (wire form,
// EncodeHeader); longer ones are cut (see ArrivalHeader).
const MaxArrivalHeader = 16 << 10

// cutValue is the length header values are cut to when an arrival's
// headers are over MaxArrivalHeader.
const cutValue = 256

// ArrivalHeader encodes a duplicate's headers for the arrivals table:
// EncodeHeader's bytes when they fit in MaxArrivalHeader; else, with every
// value cut to 256 bytes and, if still too long, the headers that do not
// fit left out, with cut set. Headers EncodeHeader refuses (a name with a
// colon, a value with a line break: net/http never passes them) are left
// out too.
func ArrivalHeader(h http.Header) (b []byte, cut bool) {
	if b, err := EncodeHeader(h); err == nil && len(b) <= MaxArrivalHeader {
		return b, false
	}
	b = []byte{}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			if len(v) > cutValue {
				v = v[:cutValue]
			}
			line, err := EncodeHeader(http.Header{k: {v}})
			if err != nil || len(b)+len(line) > MaxArrivalHeader {
				continue
			}
			b = append(b, line...)
		}
	}
	return b, true
}

// BodySHA256 is the hex SHA-256 of a body, as an arrival whose body
// differed and a rejection keep it.
func BodySHA256(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// HeaderChange is a header whose values in a duplicate arrival differ from
// the original request's.
type HeaderChange struct {
	Name     string
	Original []string // nil: the original did not have it
	Arrival  []string // nil: the duplicate did not have it
}

// HeaderDiff lists, by name, the headers of a duplicate arrival that
// differ from the original's. When the arrival's headers were cut
// (Arrival.HeaderCut), a header missing from it or a value that is the
// cut prefix of the original's is not a difference: it may have been
// cut.
func HeaderDiff(original, arrival http.Header, cut bool) []HeaderChange {
	var out []HeaderChange
	names := slices.Sorted(maps.Keys(original))
	for k := range arrival {
		if _, ok := original[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		o, a := original[k], arrival[k]
		if a == nil && cut {
			continue
		}
		if slices.EqualFunc(o, a, func(o, a string) bool {
			return o == a || cut && len(a) == cutValue && strings.HasPrefix(o, a)
		}) {
			continue
		}
		out = append(out, HeaderChange{Name: k, Original: o, Arrival: a})
	}
	return out
}

// VerificationArgs are the values of the columns verify_method,
// verify_scheme and verify_secret for v: nil (NULL) for what is not
// recorded.
func VerificationArgs(v anyhook.Verification) (method, scheme, secret any) {
	if v.Method == "" {
		return nil, nil, nil
	}
	method, scheme = v.Method, v.Scheme
	if v.Secret >= 0 {
		secret = v.Secret
	}
	return method, scheme, secret
}

// OriginArg is the stored form of an event's origin: NULL for a webhook
// (what every event recorded before the column was), else the origin.
func OriginArg(origin string) any {
	if origin == "" || origin == anyhook.OriginWebhook {
		return nil
	}
	return origin
}

// NotRoutedArg is the stored form of an event's NotRouted: the names
// comma-separated (destination names have no commas), nil for none.
func NotRoutedArg(names []string) any {
	if len(names) == 0 {
		return nil
	}
	return strings.Join(names, ",")
}

// TypePattern turns a type glob (invoice.*: * is any run of characters,
// anything else itself) into a LIKE pattern with \ as the escape
// character. Both stores match it ignoring ASCII case.
func TypePattern(glob string) string {
	var b strings.Builder
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteByte('%')
		case '%', '_', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TypeMatches says whether the type t matches the glob as TypePattern's
// LIKE does: * is any run of characters, ASCII case ignored.
func TypeMatches(glob, t string) bool {
	parts := strings.Split(LowerType(glob), "*")
	t = LowerType(t)
	if len(parts) == 1 {
		return t == parts[0]
	}
	if !strings.HasPrefix(t, parts[0]) {
		return false
	}
	t = t[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(t, p)
		if i < 0 {
			return false
		}
		t = t[i+len(p):]
	}
	return len(t) >= len(last) && strings.HasSuffix(t, last)
}

// LowerType lowers the ASCII letters of a type (or glob) only, as the
// stores' lower() does on a type (SQLite's; PostgreSQL's under COLLATE "C").
func LowerType(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
