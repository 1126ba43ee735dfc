// Package route decides which destinations receive an event: a
// destination's filter is an expression in CEL (the Common Expression
// Language) over the event, compiled and type-checked when the config is
// loaded and evaluated once per event and destination at ingest, with a
// cost limit.
//
// The variables are source, type, id (the provider's event id), object,
// version (strings), headers (lower-case names to the first value) and
// body (the parsed JSON; null when the body is not JSON).
package route

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"

	"github.com/anyhook/anyhook"
)

// CostLimit bounds one evaluation, in CEL's cost units (about one per
// operation and per element a comprehension visits). An expression that
// goes over it fails, and a failed evaluation is no match.
const CostLimit = 100_000

// MaxExpr bounds the length of an expression, in bytes.
const MaxExpr = 4096

// Filter is a compiled expression; safe for concurrent use.
type Filter struct {
	expr string
	prg  cel.Program
}

// compiler is a CEL environment with the filter variables. Its mutex
// serializes compiling: cel-go v0.33's type checker fills a lazily built
// symbol catalog on the shared environment while other checks copy it (a
// data race when two configs, or two tests, compile at once). Compiling
// happens when a config is loaded, so one at a time costs nothing;
// evaluation stays concurrent.
type compiler struct {
	mu  sync.Mutex
	env *cel.Env
}

func newCompiler() *compiler {
	e, err := cel.NewEnv(
		cel.Variable("source", cel.StringType),
		cel.Variable("type", cel.StringType),
		cel.Variable("id", cel.StringType),
		cel.Variable("object", cel.StringType),
		cel.Variable("version", cel.StringType),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("body", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
	)
	if err != nil {
		panic("route: " + err.Error()) // the declarations above are fixed
	}
	return &compiler{env: e}
}

var std = newCompiler()

// Compile parses and type-checks expr. Its error is one line naming the
// column of the first problem.
func Compile(expr string) (*Filter, error) { return std.compile(expr) }

func (c *compiler) compile(expr string) (*Filter, error) {
	if len(expr) > MaxExpr {
		return nil, fmt.Errorf("longer than %d bytes", MaxExpr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ast, iss := c.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, fmt.Sprintf("column %d: %s", e.Location.Column()+1, e.Message))
		}
		return nil, fmt.Errorf("invalid CEL expression: %s", strings.Join(msgs, "; "))
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the expression is a %s; a filter must be true or false", t)
	}
	prg, err := c.env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("invalid CEL expression: %w", err)
	}
	return &Filter{expr: expr, prg: prg}, nil
}

// String returns the expression.
func (f *Filter) String() string { return f.expr }

// Event is what a filter sees of one event.
type Event struct {
	Source, Type, ID, Object, Version string
	Header                            http.Header
	Body                              []byte
}

// Input is one event prepared for evaluation: its headers and body are
// decoded at most once, on first use, however many filters read them. Not
// safe for concurrent use.
type Input struct {
	ev      *Event
	headers map[string]string
	body    any
	parsed  bool
}

// NewInput prepares ev for evaluation.
func NewInput(ev *Event) *Input { return &Input{ev: ev} }

// ResolveName implements interpreter.Activation.
func (in *Input) ResolveName(name string) (any, bool) {
	switch name {
	case "source":
		return in.ev.Source, true
	case "type":
		return in.ev.Type, true
	case "id":
		return in.ev.ID, true
	case "object":
		return in.ev.Object, true
	case "version":
		return in.ev.Version, true
	case "headers":
		if in.headers == nil {
			in.headers = make(map[string]string, len(in.ev.Header))
			for k, v := range in.ev.Header {
				if len(v) > 0 {
					in.headers[strings.ToLower(k)] = v[0]
				}
			}
		}
		return in.headers, true
	case "body":
		if !in.parsed {
			in.parsed = true
			in.body = parseBody(in.ev.Body)
		}
		if in.body == nil {
			return types.NullValue, true
		}
		return in.body, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (in *Input) Parent() interpreter.Activation { return nil }

// parseBody decodes a JSON body with integral numbers as int64 (so that
// amount > 10000 compares integers) and others as float64; nil when the
// body is not one JSON value.
func parseBody(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	if _, err := dec.Token(); err == nil {
		return nil // trailing data: not one JSON value
	}
	return numbers(v)
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// ErrNotBool is the evaluation error of an expression whose value is not
// a bool (body.flag where flag is a string, say).
var ErrNotBool = errors.New("the filter's value is not true or false")

// Match evaluates f on in. An error (a missing key, a type mismatch, the
// cost limit) means no match; the caller logs it.
func (f *Filter) Match(in *Input) (bool, error) {
	out, _, err := f.prg.Eval(in)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, ErrNotBool
	}
	return b, nil
}

// FromEvent is what a filter sees of a recorded event.
func FromEvent(ev *anyhook.Event) *Event {
	return &Event{Source: ev.Source, Type: ev.Type, ID: ev.DedupKey, Object: ev.Object, Version: ev.Version,
		Header: ev.Header, Body: ev.Body}
}

// Split returns, in order, the destinations among dests whose filter (by
// name in filters; a destination without one takes every event) accepts
// in, and the others. failed, when not nil, is told of each evaluation
// that failed (and so did not accept).
func Split(filters map[string]*Filter, in *Input, dests []string, failed func(dest string, err error)) (routed, notRouted []string) {
	for _, d := range dests {
		f := filters[d]
		if f == nil {
			routed = append(routed, d)
			continue
		}
		ok, err := f.Match(in)
		if err != nil && failed != nil {
			failed(d, err)
		}
		if ok {
			routed = append(routed, d)
		} else {
			notRouted = append(notRouted, d)
		}
	}
	return routed, notRouted
}
