package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
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
// absent, null, an object or an array, or the body is not JSON. Keys match
// exactly (case-sensitive) and, where an object repeats a key, the first
// occurrence wins (encoding/json would take the last); bodies are signed by
// the provider, so this decides only dedup and ordering of odd bodies.
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
// not a scalar). It scans the bytes once, descending only into the
// members on some path, skipping the rest without decoding them, and
// stopping as soon as every path is resolved: no document is decoded into
// maps, and nothing is allocated but the values found (and, for a string
// with escapes, its unquoting). On valid JSON it answers exactly what
// encoding/json's Decoder.Token walk would (the fuzz test holds it to
// that); a syntax error stops the scan and leaves the values not yet
// found unset.
func jsonScalars(body []byte, paths ...[]string) []string {
	s := scanner{b: body, paths: paths, out: make([]string, len(paths)), done: make([]bool, len(paths)), left: len(paths)}
	var all [8]int
	active := all[:0]
	for i := range paths {
		active = append(active, i)
	}
	_ = s.value(0, active) // a malformed tail only leaves values unset
	return s.out
}

var (
	errResolved = errors.New("all paths resolved")
	errSyntax   = errors.New("malformed JSON")
)

type scanner struct {
	b     []byte
	i     int
	paths [][]string
	out   []string
	done  []bool
	left  int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// open consumes c, the opening { or [ of a value, and returns the byte
// that closes it; empty says the next byte is that one (consumed too).
func (s *scanner) open(c byte) (closing byte, empty bool) {
	s.i++
	closing = '}'
	if c == '[' {
		closing = ']'
	}
	if s.peek() == closing {
		s.i++
		return closing, true
	}
	return closing, false
}

// value reads one value at depth; active are the paths that reach it.
func (s *scanner) value(depth int, active []int) error {
	switch c := s.peek(); c {
	case '{', '[':
		closing, empty := s.open(c)
		if empty {
			return nil
		}
		var buf [8]int
		for n := 0; ; n++ {
			var key string
			if c == '{' {
				if s.peek() != '"' {
					return errSyntax
				}
				k, err := s.str(true)
				if err != nil {
					return err
				}
				if s.peek() != ':' {
					return errSyntax
				}
				s.i++
				key = k
			} else {
				key = strconv.Itoa(n)
			}
			next := buf[:0]
			for _, i := range active {
				if p := s.paths[i]; len(p) > depth && p[depth] == key && !s.done[i] {
					next = append(next, i)
				}
			}
			var err error
			if len(next) == 0 {
				err = s.skip()
			} else {
				err = s.value(depth+1, next)
			}
			if err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case closing:
				s.i++
				return nil
			default:
				return errSyntax
			}
		}
	}
	v, err := s.scalar(true)
	if err != nil {
		return err
	}
	for _, i := range active {
		if len(s.paths[i]) == depth && !s.done[i] {
			s.out[i], s.done[i] = v, true
			s.left--
		}
	}
	if s.left == 0 {
		return errResolved
	}
	return nil
}

// scalar reads a string, number or literal; with want, it returns its
// value as From documents it.
func (s *scanner) scalar(want bool) (string, error) {
	switch c := s.peek(); {
	case c == '"':
		return s.str(want)
	case c == 't':
		return s.literal("true", want)
	case c == 'f':
		return s.literal("false", want)
	case c == 'n':
		_, err := s.literal("null", false)
		return "", err
	case c == '-' || '0' <= c && c <= '9':
		return s.number(want)
	}
	return "", errSyntax
}

func (s *scanner) literal(lit string, want bool) (string, error) {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return "", errSyntax
	}
	s.i += len(lit)
	if !want {
		return "", nil
	}
	return lit, nil
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? and returns
// its exact text.
func (s *scanner) number(want bool) (string, error) {
	start := s.i
	b := s.b
	digits := func() int {
		n := 0
		for s.i < len(b) && '0' <= b[s.i] && b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(b) && b[s.i] == '0':
		s.i++
	case digits() == 0:
		return "", errSyntax
	}
	if s.i < len(b) && b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return "", errSyntax
		}
	}
	if s.i < len(b) && (b[s.i] == 'e' || b[s.i] == 'E') {
		s.i++
		if s.i < len(b) && (b[s.i] == '+' || b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return "", errSyntax
		}
	}
	if !want {
		return "", nil
	}
	return string(b[start:s.i]), nil
}

// str reads a string; with want, it returns it unquoted as encoding/json
// does (invalid UTF-8 becomes U+FFFD).
func (s *scanner) str(want bool) (string, error) {
	start := s.i
	s.i++ // the opening quote
	plain := true
	for {
		if s.i >= len(s.b) {
			return "", errSyntax
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !want {
				return "", nil
			}
			raw := s.b[start+1 : s.i-1]
			if plain && utf8.Valid(raw) {
				return string(raw), nil
			}
			var v string
			if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
				return "", errSyntax
			}
			return v, nil
		case c < 0x20:
			return "", errSyntax
		case c == '\\':
			plain = false
			s.i++
			if s.i >= len(s.b) {
				return "", errSyntax
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+5 > len(s.b) {
					return "", errSyntax
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return "", errSyntax
					}
				}
				s.i += 5
			default:
				return "", errSyntax
			}
		default:
			s.i++
		}
	}
}

// skip consumes one value without looking at it, checking its syntax;
// nesting is tracked on a stack, not by recursion.
func (s *scanner) skip() error {
	var stack []byte
	for {
		// A value.
		switch c := s.peek(); c {
		case '{', '[':
			closing, empty := s.open(c)
			if empty {
				break
			}
			stack = append(stack, closing)
			if c == '{' {
				if err := s.key(); err != nil {
					return err
				}
			}
			continue
		default:
			if _, err := s.scalar(false); err != nil {
				return err
			}
		}
		// After a value: close containers until one has a next member.
		for {
			if len(stack) == 0 {
				return nil
			}
			top := stack[len(stack)-1]
			c := s.peek()
			if c == top {
				s.i++
				stack = stack[:len(stack)-1]
				continue
			}
			if c != ',' {
				return errSyntax
			}
			s.i++
			if top == '}' {
				if err := s.key(); err != nil {
					return err
				}
			}
			break
		}
	}
}

// key reads a member's key and its colon, unlooked at.
func (s *scanner) key() error {
	if s.peek() != '"' {
		return errSyntax
	}
	if _, err := s.str(false); err != nil {
		return err
	}
	if s.peek() != ':' {
		return errSyntax
	}
	s.i++
	return nil
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
