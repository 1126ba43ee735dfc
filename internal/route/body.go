package route

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The body is decoded the way encoding/json's Decoder (with UseNumber, then
// integral numbers as int64 and others as float64) decodes it into an any,
// and accepted or refused as one JSON value by the same rules — but only
// the parts a filter reads are materialised (see paths), and those within
// a budget. The bytes are checked once per event (check), then each
// filter's decoding trusts them and skips what it does not read without
// allocating.

// maxDepth is encoding/json's limit on nesting: deeper is not JSON to it.
const maxDepth = 10000

// check finds the JSON value of b as the gateway has always read it: the
// first value after white space, refused (ok false: body is null) when it
// is not valid, or when the bytes after it begin another value (encoding/
// json's Decoder.Token would return it). It allocates nothing.
func check(b []byte) (start, end int, ok bool) {
	start = skipSpace(b, 0)
	end = validEnd(b, start)
	if end < 0 {
		return 0, 0, false
	}
	j := skipSpace(b, end)
	if j == len(b) {
		return start, end, true
	}
	switch b[j] {
	case '{', '[':
		return 0, 0, false
	case '}', ']', ':', ',':
		return start, end, true
	}
	// Anything else is read as a second value: the body is refused when
	// it is one. A container was handled above, so this is a scalar.
	if validEnd(b, j) >= 0 {
		return 0, 0, false
	}
	return start, end, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// validEnd returns where the JSON value that starts at b[i] ends, or -1
// when it is not valid JSON (RFC 8259, at most maxDepth deep). A scalar
// ends where its grammar does, whatever follows it, as in encoding/json's
// scanner at the top level.
func validEnd(b []byte, i int) int {
	var kinds [maxDepth/64 + 1]uint64 // one bit per open container: 1 for an object
	depth := 0
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '{', '[':
			if depth == maxDepth {
				return -1
			}
			obj := b[i] == '{'
			if obj {
				kinds[depth/64] |= 1 << (depth % 64)
			} else {
				kinds[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			i = skipSpace(b, i+1)
			if i < len(b) && (obj && b[i] == '}' || !obj && b[i] == ']') {
				depth--
				i++
				break
			}
			if obj {
				if i = validKey(b, i); i < 0 {
					return -1
				}
			}
			continue
		case '"':
			if i = validString(b, i); i < 0 {
				return -1
			}
		case 't':
			i = literal(b, i, "true")
		case 'f':
			i = literal(b, i, "false")
		case 'n':
			i = literal(b, i, "null")
		default:
			i = validNumber(b, i)
		}
		if i < 0 {
			return -1
		}
		// A value ended at b[i]: close containers, or go to the next
		// element.
		for {
			if depth == 0 {
				return i
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			obj := kinds[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			if c := b[i]; c == ',' {
				i = skipSpace(b, i+1)
				if obj {
					if i = validKey(b, i); i < 0 {
						return -1
					}
				}
				break
			} else if obj && c == '}' || !obj && c == ']' {
				depth--
				i++
				continue
			}
			return -1
		}
	}
}

// validKey checks an object's key and colon at b[i] and returns where its
// value starts, or -1.
func validKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// validString returns the end of the string that starts at b[i] (a quote),
// or -1. Bytes that are not UTF-8 are valid, as in encoding/json (they
// decode as U+FFFD).
func validString(b []byte, i int) int {
	for i++; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || hex4(b[i+2:i+6]) < 0 {
					return -1
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			i++
		}
	}
	return -1
}

// validNumber returns the end of the number that starts at b[i], or -1.
func validNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// What a decoded value costs, in bytes, against the budget: about what Go
// allocates for it on a 64-bit machine, its slot in the decoder's pending
// values included. TestBodyMemoryBound measures how real allocation
// compares.
const (
	costSlot   = 32     // a list element: its interface in the list and while pending
	costMember = 32     // an object's member while pending (its key and value)
	costKey    = 8      // a key's bytes, rounded up by the allocator, beyond its length
	costNumber = 8      // an int64 or float64 behind an interface
	costString = 16     // a string's header behind an interface, beyond its bytes
	costList   = 24     // a slice header behind an interface
	costMap    = 48     // a map's header
	costGroup  = 8 * 36 // a map's first group: 8 slots of key and value, control bytes
	costEntry  = 80     // an entry of a map larger than a group, with the tables' slack
	costFrame  = 512    // the decoder's stack for one more level of nesting
)

// mapCost is what a map of n entries costs, beyond its members.
func mapCost(n int) int {
	switch {
	case n == 0:
		return costMap
	case n <= 8:
		return costMap + costGroup
	}
	return costMap + n*costEntry
}

// decoder materialises what a filter reads of a body that check accepted.
// Its buffers are reused from one filter to the next.
type decoder struct {
	b       []byte
	left    int  // bytes of budget left
	over    bool // the budget ran out: the value is incomplete
	depth   int  // containers open
	deepest int  // the most open at once: the stack's high mark
	text    []byte
	elems   pending[any]    // elements of the lists being built, innermost last
	members pending[member] // members of the objects being built, innermost last
}

type member struct {
	key string
	val any
}

// pending holds values until their list or object is complete, in
// chunks: growing never copies, so n values pending allocate about n
// slots, not the several times n that append's reallocations leave behind.
type pending[T any] struct {
	chunks [][]T
	n      int
}

const chunkLen = 32

func (s *pending[T]) push(v T) {
	c := s.n / chunkLen
	if c == len(s.chunks) {
		s.chunks = append(s.chunks, make([]T, chunkLen))
	}
	s.chunks[c][s.n%chunkLen] = v
	s.n++
}

// take passes the values from base on to f, in order, and drops them.
func (s *pending[T]) take(base int, f func(i int, v T)) {
	var zero T
	for i := base; i < s.n; i++ {
		c := &s.chunks[i/chunkLen][i%chunkLen]
		if f != nil {
			f(i-base, *c)
		}
		*c = zero
	}
	s.n = base
}

// spend takes n bytes from the budget; false once it has run out.
func (d *decoder) spend(n int) bool {
	d.left -= n
	if d.left < 0 {
		d.over = true
	}
	return !d.over
}

// open enters a container: the stack's growth counts against the budget.
func (d *decoder) open() bool {
	d.depth++
	if d.depth > d.deepest {
		d.deepest = d.depth
		return d.spend(costFrame)
	}
	return true
}

// value decodes the value at b[i] as p reads it (all of it when p is
// whole) and returns it with where it ends. With d.over set the value is
// incomplete and the end meaningless.
func (d *decoder) value(i int, p *paths) (any, int) {
	b := d.b
	switch {
	case p.whole:
		return d.all(i)
	case p.presence():
		return nil, skip(b, i)
	}
	switch b[i] {
	case '{':
		return d.object(i, p)
	case '[':
		return d.list(i, p)
	}
	return d.all(i)
}

// object decodes the object at b[i]: every member when p is nil, else the
// members p reads, and when it is iterated (p.each) every other key too,
// with null.
func (d *decoder) object(i int, p *paths) (any, int) {
	b := d.b
	base := d.members.n
	if !d.open() {
		return nil, 0
	}
	i = skipSpace(b, i+1)
	for b[i] != '}' {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := stringEnd(b, i)
		raw := b[i+1 : end-1]
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // the colon
		var key string
		var v any
		if p != nil {
			// A key needs unquoting only when it has escapes or bytes
			// that are not UTF-8, and then only when it is short enough
			// to be one the expression names.
			var sub *paths
			if simple(raw) {
				sub = p.fields[string(raw)]
			} else if unquotedLen(raw) <= MaxExpr {
				d.text = unquote(d.text[:0], raw)
				sub = p.fields[string(d.text)]
			}
			switch {
			case sub != nil:
				if !d.spend(costMember) {
					return nil, 0
				}
				key = sub.name // the map shares the expression's string
				v, i = d.value(i, sub)
			case p.each != nil:
				// A macro iterates the object: its keys, every one.
				if key = d.string(raw, costMember+costKey); d.over {
					return nil, 0
				}
				i = skip(b, i)
			default:
				i = skipSpace(b, skip(b, i))
				continue
			}
		} else {
			if key = d.string(raw, costMember+costKey); d.over {
				return nil, 0
			}
			v, i = d.all(i)
		}
		if d.over {
			return nil, 0
		}
		d.members.push(member{key, v})
		i = skipSpace(b, i)
	}
	d.depth--
	n := d.members.n - base
	if !d.spend(mapCost(n)) {
		return nil, 0
	}
	m := make(map[string]any, n)
	d.members.take(base, func(_ int, f member) {
		m[f.key] = f.val // a later duplicate wins, as in encoding/json
	})
	return m, i + 1
}

// list decodes the list at b[i]: every element when p is nil or iterated
// (p.each), else the first p.maxItem+1 (those it reads; null in the
// others' places).
func (d *decoder) list(i int, p *paths) (any, int) {
	b := d.b
	base := d.elems.n
	if !d.open() {
		return nil, 0
	}
	i = skipSpace(b, i+1)
	for n := 0; b[i] != ']'; n++ {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		var v any
		switch {
		case p == nil:
			v, i = d.all(i)
		case p.each != nil:
			sub := p.each // settled: items[n] holds what each reads
			if c := p.items[n]; c != nil {
				sub = c
			}
			v, i = d.value(i, sub)
		case p.items != nil && n <= p.maxItem:
			if sub := p.items[n]; sub != nil {
				v, i = d.value(i, sub)
			} else {
				i = skip(b, i)
			}
		default:
			i = skipSpace(b, skip(b, i))
			continue
		}
		if d.over || !d.spend(costSlot) {
			return nil, 0
		}
		d.elems.push(v)
		i = skipSpace(b, i)
	}
	d.depth--
	if !d.spend(costList) {
		return nil, 0
	}
	l := make([]any, d.elems.n-base)
	d.elems.take(base, func(i int, v any) { l[i] = v })
	return l, i + 1
}

// all decodes the value at b[i] in full.
func (d *decoder) all(i int) (any, int) {
	b := d.b
	switch b[i] {
	case '{':
		return d.object(i, nil)
	case '[':
		return d.list(i, nil)
	case '"':
		end := stringEnd(b, i)
		if s := d.string(b[i+1:end-1], costString); !d.over {
			return s, end
		}
		return nil, 0
	case 't':
		return true, i + 4
	case 'f':
		return false, i + 5
	case 'n':
		return nil, i + 4
	}
	end := numberEnd(b, i)
	if !d.spend(costNumber) {
		return nil, 0
	}
	return number(b[i:end]), end
}

// number is a JSON number as an int64 when it is one, else a float64
// (±Inf beyond float64's range), as json.Number's Int64 then Float64.
func number(raw []byte) any {
	if !bytes.ContainsAny(raw, ".eE") {
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return n
		}
	}
	f, _ := strconv.ParseFloat(string(raw), 64)
	return f
}

// string is the value of a string's raw bytes, spending its length and
// cost; "" with d.over set when the budget does not cover them.
func (d *decoder) string(raw []byte, cost int) string {
	if simple(raw) {
		if !d.spend(cost + len(raw)) {
			return ""
		}
		return string(raw)
	}
	// Unquoted through d.text, whose growth the budget pays for too.
	n := unquotedLen(raw)
	if !d.spend(cost + n) {
		return ""
	}
	if n > cap(d.text) {
		if !d.spend(n) {
			return ""
		}
		d.text = make([]byte, 0, n)
	}
	d.text = unquote(d.text[:0], raw)
	return string(d.text)
}

// simple reports whether a string's raw bytes are its value: no escape,
// and UTF-8 (other bytes decode as U+FFFD).
func simple(raw []byte) bool {
	return bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw)
}

// unquote appends the value of a valid JSON string's raw bytes (between
// the quotes) to dst, as encoding/json decodes it: escapes resolved, a
// surrogate pair joined, a lone surrogate and each byte that is not UTF-8
// replaced by U+FFFD.
func unquote(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '\\':
			var r rune
			r, i = escape(raw, i)
			dst = utf8.AppendRune(dst, r)
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			dst = utf8.AppendRune(dst, r)
			i += n
		}
	}
	return dst
}

// unquotedLen is the length of what unquote appends for raw.
func unquotedLen(raw []byte) int {
	n := 0
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '\\':
			var r rune
			r, i = escape(raw, i)
			n += utf8.RuneLen(r)
		case c < utf8.RuneSelf:
			n++
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			n += utf8.RuneLen(r)
			i += size
		}
	}
	return n
}

// escape decodes the escape at raw[i] (a backslash) and returns its rune
// and where the next character starts.
func escape(raw []byte, i int) (rune, int) {
	switch e := raw[i+1]; e {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r := hex4(raw[i+2 : i+6])
		i += 6
		if !utf16.IsSurrogate(r) {
			return r, i
		}
		if len(raw)-i >= 6 && raw[i] == '\\' && raw[i+1] == 'u' {
			if pair := utf16.DecodeRune(r, hex4(raw[i+2:i+6])); pair != utf8.RuneError {
				return pair, i + 6
			}
		}
		return utf8.RuneError, i
	default: // " \ /
		return rune(e), i + 2
	}
}

// skip returns where the valid value at b[i] ends, allocating nothing.
func skip(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			case '"':
				i = stringEnd(b, i) - 1
			}
			i++
		}
	case 't', 'n':
		return i + 4
	case 'f':
		return i + 5
	}
	return numberEnd(b, i)
}

// stringEnd returns the end of the valid string that starts at b[i].
func stringEnd(b []byte, i int) int {
	for i++; ; {
		q := bytes.IndexByte(b[i:], '"')
		i += q
		// The quote is escaped when an odd number of backslashes
		// precede it.
		n := 0
		for b[i-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
		i++
	}
}

func numberEnd(b []byte, i int) int {
	for i < len(b) {
		switch c := b[i]; {
		case '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			i++
		default:
			return i
		}
	}
	return i
}
