package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzScalarsMatchDecoder holds the byte scanner to the Decoder walk: on
// valid JSON, the same value for every path.
func FuzzScalarsMatchDecoder(f *testing.F) {
	f.Add(`{"id":"evt_\u00e9\"1","created":17,"data":{"object":{"id":"o\ud83d\ude00"}}}`, "id", "data.object.id")
	f.Add(`{"a":[1,{"b":-0.5e+3}],"a":{"b":true}}`, "a.1.b", "a.b")
	f.Add(`{"x":[[[]]],"y":null,"z":"\xff\u0000"}`, "y", "z")
	f.Add(`[{"id":1},{"id":"2"}]`, "1.id", "0.id")
	f.Fuzz(func(t *testing.T, body, p1, p2 string) {
		if !json.Valid([]byte(body)) || p1 == "" || p2 == "" {
			jsonScalars([]byte(body), strings.Split(p1, "."), strings.Split(p2, ".")) // no panic
			return
		}
		paths := [][]string{strings.Split(p1, "."), strings.Split(p2, "."), {"id"}}
		got := jsonScalars([]byte(body), paths...)
		want := jsonScalarsDecoder([]byte(body), paths...)
		if !slices.Equal(got, want) {
			t.Fatalf("jsonScalars(%q, %q) = %q, Decoder walk %q", body, paths, got, want)
		}
	})
}

// BenchmarkScalars compares the scanner with the Decoder walk on a Stripe
// event (go test -bench Scalars -benchmem).
func BenchmarkScalars(b *testing.B) {
	body := []byte(`{"id":"evt_1","object":"event","api_version":"2024-06-20","created":1700000000,"data":{"object":{"id":"ch_1","object":"charge","amount":2000,"metadata":{"pad":"` + strings.Repeat("x", 900) + `"}}},"livemode":false,"type":"charge.succeeded"}`)
	paths := [][]string{{"id"}, {"created"}, {"data", "object", "id"}}
	b.Run("scanner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonScalars(body, paths...)
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonScalarsDecoder(body, paths...)
		}
	})
}

// jsonScalarsDecoder is the encoding/json Decoder.Token walk that
// jsonScalars replaced, kept as the reference it is checked against.
// It returns the scalar at each path of body ("" when absent or
// not a scalar). It walks the token stream once, descending only into the
// members on some path and stopping as soon as every path is resolved; it
// never decodes the document into maps.
func jsonScalarsDecoder(body []byte, paths ...[]string) []string {
	w := decWalker{
		dec:   json.NewDecoder(bytes.NewReader(body)),
		paths: paths,
		out:   make([]string, len(paths)),
		done:  make([]bool, len(paths)),
		left:  len(paths),
	}
	w.dec.UseNumber()
	active := make([]int, len(paths))
	for i := range active {
		active[i] = i
	}
	_ = w.value(0, active) // a malformed tail only leaves values unset
	return w.out
}

var errDecResolved = errors.New("all paths resolved")

type decWalker struct {
	dec   *json.Decoder
	paths [][]string
	out   []string
	done  []bool
	left  int
}

// value reads one value at depth; active are the paths that reach it.
func (w *decWalker) value(depth int, active []int) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		for _, i := range active {
			if len(w.paths[i]) == depth && !w.done[i] {
				w.out[i], w.done[i] = decScalar(tok), true
				w.left--
			}
		}
		if w.left == 0 {
			return errDecResolved
		}
		return nil
	}
	for n := 0; w.dec.More(); n++ {
		var key string
		if d == '{' {
			kt, err := w.dec.Token()
			if err != nil {
				return err
			}
			key, _ = kt.(string)
		} else {
			key = strconv.Itoa(n)
		}
		var next []int
		for _, i := range active {
			if p := w.paths[i]; len(p) > depth && p[depth] == key && !w.done[i] {
				next = append(next, i)
			}
		}
		if next == nil {
			err = w.skip()
		} else {
			err = w.value(depth+1, next)
		}
		if err != nil {
			return err
		}
	}
	_, err = w.dec.Token() // the closing delimiter
	return err
}

// skip consumes one value without looking at it.
func (w *decWalker) skip() error {
	depth := 0
	for {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

func decScalar(tok json.Token) string {
	switch v := tok.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}
