package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// incompressible is n bytes of hex that no compression shortens much:
// PostgreSQL compresses a long index value before it measures the row, so
// a repeated letter would fit where a real key of that length does not.
func incompressible(seed string, n int) string {
	var b strings.Builder
	for sum := sha256.Sum256([]byte(seed)); b.Len() < n; sum = sha256.Sum256(sum[:]) {
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	return b.String()[:n]
}

// textFields are the fields of an event read from the request, each with
// how to set it on an event and its bound (0: none). An ordering object
// needs a version and the reverse, so each sets the other to a plain
// value.
var textFields = []struct {
	name  string
	max   int
	shown bool // shown as it is (logs, CLI, dashboard): no control characters
	set   func(ne *store.NewEvent, v string)
}{
	{"DedupKey", store.MaxDedupKey, true, func(ne *store.NewEvent, v string) { ne.Event.DedupKey = v }},
	{"ContentKey", store.MaxDedupKey, false, func(ne *store.NewEvent, v string) { ne.ContentKey = v }},
	{"Type", store.MaxType, true, func(ne *store.NewEvent, v string) { ne.Event.Type = v }},
	{"Object", store.MaxObject, true, func(ne *store.NewEvent, v string) { ne.Event.Object, ne.Event.Version = v, "1" }},
	{"Version", store.MaxVersion, true, func(ne *store.NewEvent, v string) { ne.Event.Object, ne.Event.Version = "order-v", v }},
	{"Path", 0, false, func(ne *store.NewEvent, v string) { ne.Event.Path = v }},
}

// controls are values with a control character: a newline and a
// carriage return (forged log lines), an escape sequence (a terminal
// printing a CLI table), a C1 control, a line separator and a
// right-to-left override.
var controls = []string{"a\nb", "a\rb", "\x1b[2J", "a\u0085b", "a\u2028b", "x\u202eyz", "\tab"}

// testFieldsRefusedAlike: for each field of an event read from the
// request, a value with a NUL byte, one that is not UTF-8 (\xff\xfe, as
// a header may carry), for those with a bound one of 900 KB and one a
// byte over it, and for those shown as they are each of controls, fail
// alone, on both stores, with a *store.FieldError (ErrInvalid)
// that names the field, leaving nothing behind, while the batch-mates
// around them are recorded (of objects, so that PostgreSQL reads their
// marks first). PostgreSQL would refuse the first two and the last
// whatever SQLite did (index row too large); the store refuses all four
// before SQL on both, so ingest answers them alike.
func testFieldsRefusedAlike(t *testing.T, s store.Store) {
	for _, f := range textFields {
		bad := []string{"a\x00b", "\xff\xfe"}
		if f.max > 0 {
			bad = append(bad, strings.Repeat("x", 900<<10), incompressible(f.name, f.max+1))
		}
		if f.shown {
			bad = append(bad, controls...)
		}
		batch := []store.NewEvent{versioned("good-1-"+f.name, "order-g1", "1", false)}
		for i, v := range bad {
			ne := newEvent("shop", "bad-"+f.name+"-"+string(rune('a'+i)), "d")
			f.set(&ne, v)
			batch = append(batch, ne)
		}
		batch = append(batch, versioned("good-2-"+f.name, "order-g2", "1", false))
		res, err := s.Ingest(ctx(t), batch)
		if err != nil || len(res) != len(batch) {
			t.Fatalf("%s: Ingest = %d results, %v", f.name, len(res), err)
		}
		for i, r := range res {
			last := i == len(res)-1
			if i == 0 || last {
				if r.Err != nil || r.Duplicate || len(event(t, s, r.ID).Deliveries) != 1 {
					t.Fatalf("%s: batch-mate %d = %+v, want recorded", f.name, i, r)
				}
				continue
			}
			var fe *store.FieldError
			if !errors.Is(r.Err, anyhook.ErrInvalid) || !errors.As(r.Err, &fe) || r.ID != "" {
				t.Fatalf("%s: value %d = %+v, want a FieldError wrapping ErrInvalid", f.name, i-1, r)
			}
			if _, err := s.Event(ctx(t), batch[i].Event.ID); !errors.Is(err, anyhook.ErrNotFound) {
				t.Fatalf("%s: the refused value %d left event %s behind: %v", f.name, i-1, batch[i].Event.ID, err)
			}
		}
	}
}

// testFieldsAtTheirBounds: values exactly at their bounds, incompressible,
// under a long source name, are recorded and read back as they were on
// both stores (the index rows fit PostgreSQL's btree), and the same keys
// again are a duplicate (found through those indexes).
func testFieldsAtTheirBounds(t *testing.T, s store.Store) {
	source := incompressible("source", 200)
	ne := newEvent(source, incompressible("id", store.MaxDedupKey), "d")
	ne.ContentKey = incompressible("content", store.MaxDedupKey)
	ne.Event.Type = "é✓" + incompressible("type", store.MaxType-len("é✓"))
	ne.Event.Object = incompressible("object", store.MaxObject)
	ne.Event.Version = incompressible("version", store.MaxVersion)
	first := ingest(t, s, ne)[0]
	ev := event(t, s, first.ID)
	if ev.DedupKey != ne.Event.DedupKey || ev.Type != ne.Event.Type || ev.Object != ne.Event.Object || ev.Version != ne.Event.Version {
		t.Fatalf("stored %+v, want the fields as given", ev)
	}
	again := ne
	again.Event.ID = store.NewID()
	if r := ingest(t, s, again)[0]; !r.Duplicate || r.ID != first.ID {
		t.Fatalf("the same keys again = %+v, want a duplicate of %s", r, first.ID)
	}
	byContent := newEvent(source, "other-id", "d")
	byContent.ContentKey = ne.ContentKey
	if r := ingest(t, s, byContent)[0]; !r.Duplicate || r.ID != first.ID {
		t.Fatalf("the same content key again = %+v, want a duplicate of %s", r, first.ID)
	}
}
