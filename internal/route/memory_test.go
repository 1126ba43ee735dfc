package route

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// memoryBound is what SECURITY.md promises one evaluation allocates at
// most beyond the body: 4 × MaxDecoded.
const memoryBound = 4 * MaxDecoded

// allocated is the bytes the process allocated while f ran (freed or
// not), and the growth of the stack of the goroutine it runs on. Only
// meaningful in a test that is not parallel: the others wait.
func allocated(f func()) uint64 {
	n := make(chan uint64)
	go func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		stack := max(0, int64(after.StackInuse)-int64(before.StackInuse))
		n <- after.TotalAlloc - before.TotalAlloc + uint64(stack)
	}()
	return <-n
}

// repeated is prefix, then elem repeated (with commas) until the body has
// at least size bytes, then suffix. N in elem is the element's number.
func repeated(prefix, elem, suffix string, size int) []byte {
	var b strings.Builder
	b.Grow(size + len(elem) + len(suffix))
	b.WriteString(prefix)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strings.ReplaceAll(elem, "N", fmt.Sprint(i)))
	}
	b.WriteString(suffix)
	return []byte(b.String())
}

// fitting is the longest body repeated(prefix, elem, suffix, …) whose
// decoding in full stays within MaxDecoded: the most a filter that reads
// it all can materialise.
func fitting(prefix, elem, suffix string) []byte {
	lo, hi := 1, MaxDecoded
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if _, over := decodeAll(repeated(prefix, elem, suffix, mid)); over {
			hi = mid - 1
		} else {
			lo = mid
		}
	}
	return repeated(prefix, elem, suffix, lo)
}

// TestBodyMemoryBound measures what one evaluation allocates, the decoded
// body and CEL's own values together, over bodies built to cost the most:
// never more than memoryBound, whatever the body's size. Not parallel, so
// that nothing else allocates meanwhile.
func TestBodyMemoryBound(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what is allocated; run without -race")
	}
	// The shape: ~10 MB of empty objects under a key the filter
	// does not read.
	big := repeated(`{"a":[`, `{}`, `]}`, 10<<20)
	long := `{"s":"` + strings.Repeat("x", MaxDecoded-4000) + `","a":[1,2,3]}`
	nested := func(depth int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
	}
	// A 200 KB string and a list of numbers, for the loops.
	stringAndList := []byte(`{"s":"` + strings.Repeat("x", 200_000) + `",` + string(repeated(`"a":[`, `N`, `]}`, 30000)))
	deepest := 1
	for {
		if _, over := decodeAll(nested(deepest + 1)); over {
			break
		}
		deepest++
	}
	for _, tc := range []struct {
		name, expr string
		body       []byte
		max        uint64
	}{
		// A filter that reads one path skips the rest without allocating.
		{"paths", `has(body.amount) && body.amount > 10`, big, 64 << 10},
		{"paths, several", `type.startsWith("charge.") || body.data.object.amount > 10 || has(body.a[2].b)`, big, 64 << 10},
		// Filters that read a big part decode it until the budget runs out.
		{"a list whole", `size(body.a) > 0`, big, memoryBound},
		{"a list iterated", `body.a.exists(x, has(x.b))`, big, memoryBound},
		{"the body whole", `body != null`, big, memoryBound},
		// The shapes that cost the most per byte, decoded in full, as big as
		// fits.
		{"empty objects", `size(body.a) > 0`, fitting(`{"a":[`, `{}`, `]}`), memoryBound},
		{"small objects", `size(body.a) > 0`, fitting(`{"a":[`, `{"b":N}`, `]}`), memoryBound},
		{"empty lists", `size(body.a) > 0`, fitting(`{"a":[`, `[]`, `]}`), memoryBound},
		{"doubles", `size(body.a) > 0`, fitting(`{"a":[`, `1.5`, `]}`), memoryBound},
		{"empty strings", `size(body.a) > 0`, fitting(`{"a":[`, `""`, `]}`), memoryBound},
		{"keys", `size(body.a) > 0`, fitting(`{"a":{`, `"kN":0`, `}}`), memoryBound},
		{"escaped keys", `size(body.a) > 0`, fitting(`{"a":{`, `"\u006bN":0`, `}}`), memoryBound},
		{"bytes not UTF-8", `size(body.a) > 0`, fitting(`{"a":[`, "\"\xff\xff\xff\xff\xff\xff\xff\xff\"", `]}`), memoryBound},
		{"a string not UTF-8", `size(body.s) > 0`, []byte("{\"s\":\"" + strings.Repeat("\xff", MaxDecoded/7) + "\"}"), memoryBound},
		{"escapes", `size(body.s) > 0`, []byte(`{"s":"` + strings.Repeat(`\u00e9`, MaxDecoded/5) + `"}`), memoryBound},
		{"deep", `size(body.a) > 0`, nested(maxDepth - 1), memoryBound},
		{"as deep as fits", `size(body.a) > 0`, nested(deepest), memoryBound},
		// CEL's own values, up to its cost limit.
		{"concatenations", `(body.s + body.s + body.s).size() > 0`, []byte(long), memoryBound},
		{"concatenations in a loop", `body.a.map(x, body.s + body.s).size() > 0`, []byte(long), memoryBound},
		{"lists in a loop", `body.a.map(x, [x, x, x]).size() > 0`, fitting(`{"a":[`, `N`, `]}`), memoryBound},
		{"maps in a loop", `body.a.map(x, {"k": x}).size() > 0`, repeated(`{"a":[`, `N`, `]}`, 30000), memoryBound},
		// Operations CEL charges one unit on dyn values whatever their
		// size (1.2 GB, 137 MB and 14 MB before they were charged by it).
		{"conversions in a loop", `body.a.map(x, bytes(body.s)).size() > 0`, stringAndList, memoryBound},
		{"conversions back in a loop", `body.a.map(x, string(bytes(body.s))).size() > 0`, stringAndList, memoryBound},
		{"in in a loop", `body.a.map(x, x in body.a).size() > 0`, stringAndList, memoryBound},
		{"list equality in a loop", `body.a.map(x, body.a == body.a).size() > 0`, stringAndList, memoryBound},
		{"list concatenation in a loop", `body.a.map(x, body.a + body.a).size() > 0`, stringAndList, memoryBound},
		{"map keys in a loop", `body.a.map(x, {body.s + string(x): 1}).size() > 0`, stringAndList, memoryBound},
		{"sizes of concatenations in a loop", `body.a.map(x, size(body.s + body.s)).size() > 0`, stringAndList, memoryBound},
		{"nested loops", `body.a.map(x, body.a.map(y, y)).size() > 0`, stringAndList, memoryBound},
		{"a constant pattern in a loop", `body.a.map(x, body.s.matches("^(x+x+)+y$")).size() > 0`, stringAndList, memoryBound},
	} {
		f, err := Compile(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		ev := &Event{Type: "invoice.paid", Header: http.Header{"Content-Type": {"application/json"}}, Body: tc.body}
		var ok bool
		n := allocated(func() { ok, err = f.Match(NewInput(ev)) })
		t.Logf("%s: %s on %d bytes: %d bytes allocated (%v, %v)", tc.name, tc.expr, len(tc.body), n, ok, err)
		if n > tc.max {
			t.Errorf("%s: %s on %d bytes allocated %d bytes, more than %d", tc.name, tc.expr, len(tc.body), n, tc.max)
		}
	}

	// The same filter on the whole body decoded the old way goes far over
	// the bound, on a tenth of the size: the measure tells them apart.
	f, err := Compile(`has(body.amount) && body.amount > 10`)
	if err != nil {
		t.Fatal(err)
	}
	ev := &Event{Body: repeated(`{"a":[`, `{}`, `]}`, 1<<20)}
	if n := allocated(func() { _, _ = matchFull(f, ev) }); n <= memoryBound {
		t.Fatalf("the full decoding of 1 MiB allocated %d bytes, within the bound: the test cannot fail", n)
	}
}
