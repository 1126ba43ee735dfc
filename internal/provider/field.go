package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Field says where a value sits in a request: a header (header:NAME) or a
// JSON path into the body (json:a.b.c; a numeric segment indexes an array).
// The zero Field extracts nothing.
type Field struct {
	header string   // canonical header name
	path   []string // JSON path
}

// ParseField parses "header:NAME" or "json:a.b.c".
func ParseField(spec string) (Field, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "header":
		if !validHeaderName(arg) {
			return Field{}, fmt.Errorf("bad header name in %q", spec)
		}
		return Field{header: http.CanonicalHeaderKey(arg)}, nil
	case "json":
		path := strings.Split(arg, ".")
		for _, seg := range path {
			if seg == "" {
				return Field{}, fmt.Errorf("bad JSON path in %q: empty segment", spec)
			}
		}
		return Field{path: path}, nil
	}
	return Field{}, fmt.Errorf("want header:NAME or json:PATH, got %q", spec)
}

// IsZero reports whether f extracts nothing.
func (f Field) IsZero() bool { return f.header == "" && f.path == nil }

// String returns the spec f was parsed from.
func (f Field) String() string {
	switch {
	case f.header != "":
		return "header:" + f.header
	case f.path != nil:
		return "json:" + strings.Join(f.path, ".")
	}
	return ""
}

// From returns the value f names in a request: the header's first value, or
// the JSON scalar at the path (strings unquoted, numbers in their exact
// textual form, booleans as true/false). It returns "" when the value is
// absent, null, an object or an array, or the body is not JSON.
func (f Field) From(h http.Header, body []byte) string {
	return fields(h, body, f)[0]
}

// fields extracts several fields, reading the body at most once.
func fields(h http.Header, body []byte, fs ...Field) []string {
	out := make([]string, len(fs))
	var paths [][]string
	var at []int
	for i, f := range fs {
		switch {
		case f.header != "":
			out[i] = h.Get(f.header)
		case f.path != nil:
			paths = append(paths, f.path)
			at = append(at, i)
		}
	}
	if len(paths) > 0 {
		for j, v := range jsonScalars(body, paths...) {
			out[at[j]] = v
		}
	}
	return out
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// jsonScalars returns the scalar at each path of body ("" when absent or
// not a scalar). It walks the token stream once, descending only into the
// members on some path and stopping as soon as every path is resolved; it
// never decodes the document into maps.
func jsonScalars(body []byte, paths ...[]string) []string {
	w := walker{
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

var errResolved = errors.New("all paths resolved")

type walker struct {
	dec   *json.Decoder
	paths [][]string
	out   []string
	done  []bool
	left  int
}

// value reads one value at depth; active are the paths that reach it.
func (w *walker) value(depth int, active []int) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		for _, i := range active {
			if len(w.paths[i]) == depth && !w.done[i] {
				w.out[i], w.done[i] = scalar(tok), true
				w.left--
			}
		}
		if w.left == 0 {
			return errResolved
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
func (w *walker) skip() error {
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

func scalar(tok json.Token) string {
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

// jsonItems splits a JSON array into its elements' exact bytes (subslices
// of body). A body holding a single object is one item.
func jsonItems(body []byte) ([][]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		if tok == json.Delim('{') {
			return [][]byte{body}, nil
		}
		return nil, errors.New("not a JSON array or object")
	}
	var items [][]byte
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		item := []byte(raw)
		if end := int(dec.InputOffset()); end >= len(raw) && end <= len(body) && bytes.Equal(body[end-len(raw):end], raw) {
			item = body[end-len(raw) : end : end] // the request's own bytes
		}
		items = append(items, item)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return items, nil
}
