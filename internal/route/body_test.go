package route

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// fullBody is how the body was decoded before decoding followed the
// expression: all of it, with encoding/json. It is the reference the
// differential tests hold the bounded decoding to.
func fullBody(b []byte) any {
	v, _ := fullDecode(b)
	return v
}

// fullDecode is fullBody, and whether b was one JSON value.
func fullDecode(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // trailing data: not one JSON value
	}
	return fullNumbers(v), true
}

// sameDecoding fails t when route and encoding/json disagree on whether
// b is one JSON value, or (unless the budget ran out) on its value.
func sameDecoding(t *testing.T, b []byte) {
	t.Helper()
	want, wantOK := fullDecode(b)
	if _, _, ok := check(b); ok != wantOK {
		t.Fatalf("%.200q: JSON to route %v, to encoding/json %v", b, ok, wantOK)
	}
	if got, over := decodeAll(b); !over && !reflect.DeepEqual(got, want) {
		t.Fatalf("%.200q: decoded %s, encoding/json %s", b, short(got), short(want))
	}
}

func short(v any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func fullNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = fullNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = fullNumbers(e)
		}
	}
	return v
}

// fullActivation evaluates with the whole body decoded, once for all
// filters.
type fullActivation struct {
	vars   activation // the other variables
	body   any
	parsed bool
}

func newFullActivation(ev *Event) *fullActivation {
	return &fullActivation{vars: activation{in: NewInput(ev)}}
}

func (a *fullActivation) ResolveName(name string) (any, bool) {
	if name != "body" {
		return a.vars.ResolveName(name)
	}
	if !a.parsed {
		a.parsed = true
		a.body = fullBody(a.vars.in.ev.Body)
	}
	if a.body == nil {
		return types.NullValue, true
	}
	return a.body, true
}

func (a *fullActivation) Parent() interpreter.Activation { return nil }

// matchFull is Match as it was: the whole body decoded, no budget.
func matchFull(f *Filter, ev *Event) (bool, error) {
	return matchFullOn(f, newFullActivation(ev))
}

func matchFullOn(f *Filter, a *fullActivation) (bool, error) {
	out, _, err := f.prg.Eval(a)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, ErrNotBool
	}
	return b, nil
}

// decodeAll decodes b in full the new way.
func decodeAll(b []byte) (v any, over bool) {
	v, _, over = NewInput(&Event{Body: b}).decode(&paths{whole: true})
	return v, over
}

// agree fails t when the bounded evaluation of f on body, unless it ran
// out of budget, differs from the full one: the same match, the same
// error.
func agree(t *testing.T, f *Filter, body []byte) {
	t.Helper()
	ev := &Event{Type: "t", Body: body}
	got, gotErr := f.Match(NewInput(ev))
	if errors.Is(gotErr, ErrCost) {
		return
	}
	want, wantErr := matchFull(f, ev)
	if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%s on %.300q:\nbounded %v, %v\nfull    %v, %v", f, body, got, gotErr, want, wantErr)
	}
}

func TestDecodeAgrees(t *testing.T) {
	t.Parallel()
	var filters []*Filter
	for _, expr := range []string{
		`body == null`, `has(body.a)`, `has(body.a.b)`, `body.a == 1`, `body.a[0] == 1`, `body.a[1].b == 2`,
		`body.a["0"] == 1`, `body.a[0u] == 0`, `body.a[1.0] == 2`, `body.a[-1] == 1`, `body.a[true] == 1`, `body[0] == 1`,
		`size(body) > 0`, `body.a.exists(x, x == 1)`, `body.a.b > 0`, `has(body.a) && body.a.size() > 1`,
		`body.a[0] == 1 || body.a.b == 1`, `body.a[2] == 3 && has(body.a.b)`, `[1].exists(body, body == 1) && has(body.a)`,
		// Macros over parts of body: their variable's reads are read of
		// every element (or every key, of an object).
		`body.a.exists(x, x.b > 1)`, `body.a.exists(x, has(x.b))`, `body.a.all(x, x.b == 1 || x.c == 2)`,
		`body.a.exists(x, x.b > 1) && body.a[0].c == 1`, `body.a.exists(x, x[0] == 2)`, `body.a.exists(x, x.exists(y, y == 3))`,
		`body.a.map(x, x.b).size() > 1`, `body.a.filter(x, x.b > 0).size() > 0`, `body.a.exists(x, x == "b")`,
		`body.a.exists(x, true)`, `size(body.a.filter(x, false)) == 0`, `body.a.exists(body, body.b == 1)`,
		`body.a.exists(x, body.a.exists(y, y.b == x.b && x != y))`, `body.exists(k, k == "a")`, `body.a.exists_one(x, has(x.b))`,
		`body.a.exists(x, x.b.exists(y, y.c == 1))`, `body.a.exists(x, x.b > 1) || body.a[1] == null`,
	} {
		f, err := Compile(expr)
		if err != nil {
			t.Fatalf("Compile(%s): %v", expr, err)
		}
		filters = append(filters, f)
	}
	for _, body := range []string{
		``, ` `, `null`, `nul`, `{}`, `[]`, `1`, `-0`, `01`, `1x`, `1.`, `1e`, `1e+`, `-`, `1.5e3`, `1e400`, `-1e400`,
		`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `-9223372036854775809`, `12345678901234567890123`,
		`"a"`, `"a"x`, `"a`, "\"\x01\"", "\"\x1f\"", "\"\x7f\"", `"a b"`, `"\u00e9\ud83d\ude00\ud800\udc00x\ud800\u0041\udc00"`, "\"\xff\xfe\"", `"\q"`,
		`true`, `truex`, `tru`, `{}{}`, `{} {`, `{}[`, `{} 1`, `{} x`, `{} ]`, `{} }`, `{} :`, `{} ,`, `{} "a"`, `{} "a`, `{} -`, `{} tru`, `{} true`,
		`{"a":1,"a":2}`, `{"a":{"b":1},"a":{"c":2}}`, `{"\u0061":1}`, `{"a":1,"\u0061":3}`, "{\"\xff\":1}", `{"a" : [ 1 , 2 ] }`,
		`{"a":[1,2,3]}`, `{"a":[{"b":1},{"b":2}]}`, `{"a":{"0":1}}`, `{"a":"str"}`, `{"a":null}`, `{"a":[[0,1],[2,3]]}`,
		`{"a":1,}`, `{"a"}`, `{"a":}`, `[1,]`, `[1 2]`, `{"a":1]`, `[1}`, `{1:2}`,
		`{"a":[{"b":1,"c":2},{"b":2,"d":[1]},{"c":2}]}`, `{"a":[{"b":[{"c":1}]},{"b":[]}]}`, `{"a":{"b":1,"c":{"b":2}}}`,
		`{"a":[[2,3],[3]]}`, `{"a":["b","c"]}`, `{"a":[{"b":1},{"b":1}]}`, `{"a":[null,{"b":5}]}`, `{"a":[1,{"b":2}],"b":1}`,
		"\t\n\r {\"a\" :\t1}\n", "\u00a0{}",
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
		`{"a":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`,
		`{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
	} {
		sameDecoding(t, []byte(body))
		for _, f := range filters {
			agree(t, f, []byte(body))
		}
	}
}

// TestDecodeAgreesRandom: random expressions over random bodies.
func TestDecodeAgreesRandom(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	compiled := 0
	for range 3000 {
		body := randJSON(r, 4)
		sameDecoding(t, body)
		if f := randFilter(r); f != nil {
			compiled++
			agree(t, f, body)
		}
	}
	if compiled < 1000 {
		t.Fatalf("only %d random expressions of 3000 compiled", compiled)
	}
}

// randFilter is a random filter; nil when the checker refuses it (a
// comparison of a list with a number, say).
func randFilter(r *rand.Rand) *Filter {
	f, err := Compile(randExpr(r, 3))
	if err != nil {
		return nil
	}
	return f
}

// FuzzDecodeAgrees: any body, random expressions; the bounded decoding
// answers as the full one whenever it does not run out of budget.
func FuzzDecodeAgrees(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		f.Add(uint64(i), randJSON(r, 4))
	}
	f.Add(uint64(99), []byte(`{"a":[1,{"b":"\u00e9"}],"b":{"c":null},"a":{"c":[true]}}`))
	f.Fuzz(func(t *testing.T, seed uint64, body []byte) {
		r := rand.New(rand.NewPCG(seed, seed))
		sameDecoding(t, body)
		for range 4 {
			if f := randFilter(r); f != nil {
				agree(t, f, body)
			}
		}
	})
}

// FuzzUnquote: a JSON string decodes as encoding/json decodes it.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9\ud83d\ude00"`, `"\ud800\u0041"`, `"\udc00"`, "\"\xff\xed\xa0\x80\"", `"\"\\\/\b\f\n\r\t"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if validEnd(b, 0) != len(b) || len(b) == 0 || b[0] != '"' {
			return
		}
		var want string
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%q: valid to route, not to encoding/json: %v", b, err)
		}
		got := unquote(nil, b[1:len(b)-1])
		if string(got) != want {
			t.Fatalf("%q: %q, want %q", b, got, want)
		}
		if n := unquotedLen(b[1 : len(b)-1]); n != len(got) {
			t.Fatalf("%q: unquotedLen %d, unquoted %d bytes", b, n, len(got))
		}
	})
}

var (
	randKeys  = []string{"a", "b", "c", "é", "0"}
	randIndex = []string{`0`, `1`, `2`, `0u`, `1.0`, `-1`, `"a"`, `"é"`, `true`}
)

// randPath is body followed by field selections and indexes.
func randPath(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("body")
	for range r.IntN(4) {
		if r.IntN(3) == 0 {
			fmt.Fprintf(&b, "[%s]", randIndex[r.IntN(len(randIndex))])
		} else if k := randKeys[r.IntN(len(randKeys))]; k == "é" || k == "0" {
			fmt.Fprintf(&b, "[%q]", k)
		} else {
			b.WriteString("." + k)
		}
	}
	return b.String()
}

func randLiteral(r *rand.Rand) string {
	return []string{`1`, `2`, `1.5`, `-1`, `1u`, `"a"`, `"é"`, `true`, `false`, `null`, `[]`, `[1, 2]`, `{}`, `{"a": 1}`}[r.IntN(14)]
}

// randExpr is a random filter over body (not always of type bool: the
// checker accepts dyn).
func randExpr(r *rand.Rand, depth int) string {
	if depth > 0 {
		switch r.IntN(5) {
		case 0:
			return "(" + randExpr(r, depth-1) + " && " + randExpr(r, depth-1) + ")"
		case 1:
			return "(" + randExpr(r, depth-1) + " || " + randExpr(r, depth-1) + ")"
		case 2:
			return "!(" + randExpr(r, depth-1) + ")"
		case 3:
			return "(" + randExpr(r, depth-1) + " ? " + randExpr(r, depth-1) + " : " + randExpr(r, depth-1) + ")"
		}
	}
	p := randPath(r)
	k := randKeys[r.IntN(len(randKeys))]
	if k == "é" || k == "0" {
		k = "a"
	}
	switch r.IntN(14) {
	case 0:
		return "has(" + p + "." + k + ")"
	case 1:
		return p + " == " + randLiteral(r)
	case 2:
		return p + " != " + randLiteral(r)
	case 3:
		return p + " > " + randLiteral(r)
	case 4:
		return "size(" + p + ") > 1"
	case 5:
		if r.IntN(2) == 0 {
			return p + ".exists(x, x." + k + " == " + randLiteral(r) + ")"
		}
		return p + ".exists(x, x == " + randLiteral(r) + ")"
	case 6:
		return p + ".all(x, has(" + randPath(r) + "." + k + "))"
	case 7:
		return randLiteral(r) + " in " + p
	case 8:
		return "type(" + p + ") == " + []string{"map", "list", "int", "double", "string", "bool", "null_type"}[r.IntN(7)]
	case 9:
		return p + "[" + randPath(r) + "] == 1"
	case 10:
		return "string(" + p + ") == \"1\""
	case 11:
		return p
	case 12:
		return "[1, 2].exists(body, body == " + randLiteral(r) + ") || " + p + " == 1"
	default:
		return p + " == " + randPath(r)
	}
}

// randJSON is a random JSON document over randKeys, with duplicate keys,
// escapes, numbers of every form, and now and then a flaw.
func randJSON(r *rand.Rand, depth int) []byte {
	var b bytes.Buffer
	var value func(depth int)
	value = func(depth int) {
		n := 6
		if depth > 0 {
			n = 8
		}
		switch r.IntN(n) {
		case 0:
			b.WriteString([]string{`0`, `1`, `2`, `-1`, `1.5`, `1e2`, `1E-2`, `-0`, `1e400`, `9223372036854775808`, `2.0`}[r.IntN(11)])
		case 1:
			b.WriteString([]string{`"a"`, `"é"`, `"\u00e9"`, `"1"`, `""`, `"\ud800"`, "\"\xff\"", `"a\"b"`}[r.IntN(8)])
		case 2:
			b.WriteString([]string{`true`, `false`}[r.IntN(2)])
		case 3:
			b.WriteString(`null`)
		case 4, 5:
			b.WriteString(`[]`)
		default:
			if r.IntN(2) == 0 {
				b.WriteString("[")
				for i := range r.IntN(4) {
					if i > 0 {
						b.WriteString(", ")
					}
					value(depth - 1)
				}
				b.WriteString("]")
				return
			}
			b.WriteString("{")
			for i := range r.IntN(5) {
				if i > 0 {
					b.WriteString(",")
				}
				k := randKeys[r.IntN(len(randKeys))]
				switch r.IntN(4) {
				case 0:
					fmt.Fprintf(&b, `"\u%04x"`, []rune(k)[0])
				default:
					fmt.Fprintf(&b, "%q", k)
				}
				b.WriteString(": ")
				value(depth - 1)
			}
			b.WriteString("}")
		}
	}
	if r.IntN(10) == 0 {
		value(depth)
	} else {
		b.WriteString(`{"a": `)
		value(depth)
		b.WriteString(`, "b": `)
		value(depth)
		if r.IntN(4) == 0 {
			b.WriteString(`, "a": `)
			value(depth)
		}
		b.WriteString("}")
	}
	switch r.IntN(20) {
	case 0:
		b.WriteString(" x")
	case 1:
		b.WriteString(" 1")
	case 2:
		b.Truncate(b.Len() - 1)
	}
	return b.Bytes()
}

// A macro over a part of the body decodes of each element only what its
// variable reads: of 1,000 line items with five fields each, the amounts.
func TestMacroVariableReadsSelectively(t *testing.T) {
	t.Parallel()
	f, err := Compile(`body.line_items.exists(i, i.amount > 10)`)
	if err != nil {
		t.Fatal(err)
	}
	body := repeated(`{"id":"x","line_items":[`, `{"id":"li_N","sku":"sku-N","description":"a long enough description","qty":2,"amount":N}`, `]}`, 100_000)
	v, _, over := NewInput(&Event{Body: body}).decode(f.reads)
	if over {
		t.Fatal("ran out of budget")
	}
	items, _ := v.(map[string]any)["line_items"].([]any)
	if len(items) < 1000 || len(v.(map[string]any)) != 1 {
		t.Fatalf("decoded %d items and %d keys at the top, want every item and line_items alone", len(items), len(v.(map[string]any)))
	}
	for n, it := range items {
		if m, ok := it.(map[string]any); !ok || len(m) != 1 || m["amount"] == nil {
			t.Fatalf("item %d decoded as %v, want its amount alone", n, it)
		}
	}
	if ok, err := f.Match(NewInput(&Event{Body: body})); !ok || err != nil {
		t.Fatalf("Match = %v, %v; want true", ok, err)
	}
}
