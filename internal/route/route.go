// Package route decides which destinations receive an event: a
// destination's filter is an expression in CEL (the Common Expression
// Language) over the event, compiled and type-checked when the config is
// loaded and evaluated once per event and destination at ingest, with a
// cost limit.
//
// The variables are source, type, id (the provider's event id), object,
// version (strings), headers (lower-case names to the first value) and
// body (the parsed JSON; null when the body is not JSON). Of the body, an
// evaluation decodes only what its expression reads, within a budget
// counted against the cost limit.
package route

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"

	"github.com/anyhook/anyhook"
)

// CostLimit bounds one evaluation, in CEL's cost units (about one per
// operation and per element a comprehension visits), decoding the body
// included. An expression that goes over it fails, and a failed
// evaluation is no match.
const CostLimit = 100_000

// bytesPerCost is how many bytes of decoded body cost one unit: CEL's own
// rate for the bytes of a string it reads.
const bytesPerCost = 10

// MaxDecoded bounds the bytes one evaluation materialises of the body
// (its Go values: strings, numbers, maps and lists, as route estimates
// them): what the whole cost limit buys.
const MaxDecoded = CostLimit * bytesPerCost

// ErrCost is the evaluation error of a filter that reads more of the body
// than MaxDecoded, or whose decoding and evaluation together cost more
// than CostLimit.
var ErrCost = errors.New("cost limit exceeded: the filter reads too much of the body")

// MaxExpr bounds the length of an expression, in bytes.
const MaxExpr = 4096

// Filter is a compiled expression; safe for concurrent use.
type Filter struct {
	expr  string
	prg   cel.Program
	reads *paths // what the expression reads of body
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
	if err := constantPatterns(ast.NativeRep()); err != nil {
		return nil, err
	}
	prg, err := c.env.Program(ast, cel.CostLimit(CostLimit), cel.CostTracking(sizeCost{}), cel.InterruptCheckFrequency(100),
		cel.OptimizeRegex(interpreter.MatchesRegexOptimization))
	if err != nil {
		return nil, fmt.Errorf("invalid CEL expression: %w", err)
	}
	return &Filter{expr: expr, prg: prg, reads: bodyPaths(ast.NativeRep().Expr())}, nil
}

// constantPatterns refuses a matches() whose pattern is not a string
// literal: compiling a regular expression takes memory and time out of
// proportion to its length, which a cost counted on sizes cannot bound,
// so a pattern is compiled once, with the filter, never from the event.
func constantPatterns(a *celast.AST) error {
	var err error
	celast.PreOrderVisit(a.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.CallKind || e.AsCall().FunctionName() != overloads.Matches || err != nil {
			return
		}
		args := e.AsCall().Args()
		if p := args[len(args)-1]; p.Kind() != celast.LiteralKind {
			err = fmt.Errorf("invalid CEL expression: column %d: the pattern of matches() must be a string literal", a.SourceInfo().GetStartLocation(p.ID()).Column()+1)
		}
	}))
	return err
}

// sizeCost charges a call by the sizes of the values it reads and
// makes, as CEL's own cost model does for the overloads it resolves when
// compiling: on body's values (dyn) CEL picks the overload while
// evaluating and charges one unit, so a filter could build strings of any
// size (a concatenation, bytes(body.s) in a loop) or walk a list at every
// step (x in body.a, body.a == body.a) within its limit. A string or bytes
// a call returns costs a unit per bytesPerCost bytes (what it allocated,
// or at most that); a list or map it compares or searches, a unit per
// element; a string it searches or compiles (matches, contains, …), a
// unit per bytesPerCost bytes. The cost is charged once the call returns:
// one call can allocate at most what it is given, and the next is
// stopped.
type sizeCost struct{}

func (sizeCost) CallCost(function, _ string, args []ref.Val, result ref.Val) *uint64 {
	var n int
	switch function {
	case operators.In:
		if len(args) == 2 {
			n = elements(args[1])
		}
	case operators.Equals, operators.NotEquals:
		if len(args) == 2 {
			n = min(elements(args[0]), elements(args[1])) + min(textLen(args[0]), textLen(args[1]))/bytesPerCost
		}
	case overloads.Matches, overloads.Contains, overloads.StartsWith, overloads.EndsWith:
		for _, a := range args {
			n += textLen(a) / bytesPerCost
		}
	}
	n += (textLen(result) + bytesPerCost - 1) / bytesPerCost
	if n == 0 {
		return nil // CEL's own cost
	}
	c := uint64(n) + 1
	return &c
}

// textLen is the length of a string or bytes value, else 0.
func textLen(v ref.Val) int {
	switch v := v.(type) {
	case types.String:
		return len(v)
	case types.Bytes:
		return len(v)
	}
	return 0
}

// elements is the number of elements of a list or map value, else 0.
func elements(v ref.Val) int {
	switch v := v.(type) {
	case traits.Lister:
		if n, ok := v.Size().(types.Int); ok {
			return int(n)
		}
	case traits.Mapper:
		if n, ok := v.Size().(types.Int); ok {
			return int(n)
		}
	}
	return 0
}

// String returns the expression.
func (f *Filter) String() string { return f.expr }

// Event is what a filter sees of one event.
type Event struct {
	Source, Type, ID, Object, Version string
	Header                            http.Header
	Body                              []byte
}

// Input is one event prepared for evaluation: its headers are decoded at
// most once, on first use, and its body checked once, however many
// filters read them. Not safe for concurrent use.
type Input struct {
	ev      *Event
	headers map[string]string
	checked bool
	json    bool // the body is one JSON value, at ev.Body[start:end]
	start   int
	end     int
	dec     *decoder // made when a filter first reads the body
	act     activation
}

// NewInput prepares ev for evaluation.
func NewInput(ev *Event) *Input { return &Input{ev: ev} }

// activation is one evaluation's variables: body decoded lazily, as the
// filter reads it.
type activation struct {
	in     *Input
	reads  *paths
	body   any
	parsed bool
	spent  int  // bytes of budget the body's decoding took
	over   bool // it went over MaxDecoded
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	in := a.in
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
		if !a.parsed {
			a.parsed = true
			a.body, a.spent, a.over = in.decode(a.reads)
		}
		if a.over {
			return types.NewErr("%s", ErrCost), true
		}
		if a.body == nil {
			return types.NullValue, true
		}
		return a.body, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

// decode materialises what p reads of the body: nil when the body is not
// one JSON value; over when it would take more than MaxDecoded.
func (in *Input) decode(p *paths) (v any, spent int, over bool) {
	if !in.checked {
		in.checked = true
		in.start, in.end, in.json = check(in.ev.Body)
	}
	if !in.json {
		return nil, 0, false
	}
	if in.dec == nil {
		in.dec = &decoder{}
	}
	d := in.dec
	d.b, d.left, d.over, d.depth, d.deepest = in.ev.Body[:in.end], MaxDecoded, false, 0, 0
	v, _ = d.value(in.start, p)
	if d.over || !d.spend(costSlot) {
		// An unfinished decoding leaves its parts in the buffers.
		d.elems.take(0, nil)
		d.members.take(0, nil)
		return nil, MaxDecoded, true
	}
	return v, MaxDecoded - d.left, false
}

// ErrNotBool is the evaluation error of an expression whose value is not
// a bool (body.flag where flag is a string, say).
var ErrNotBool = errors.New("the filter's value is not true or false")

// Match evaluates f on in. An error (a missing key, a type mismatch, the
// cost limit) means no match; the caller logs it.
func (f *Filter) Match(in *Input) (bool, error) {
	ok, _, err := f.MatchCost(in)
	return ok, err
}

// MatchCost is Match, also saying what the evaluation cost, decoding the
// body included (CostLimit when it went over): a search that evaluates
// f on many events bounds their total.
func (f *Filter) MatchCost(in *Input) (bool, uint64, error) {
	in.act = activation{in: in, reads: f.reads}
	a := &in.act
	defer func() { in.act = activation{} }() // the decoded body is garbage now
	out, det, err := f.prg.Eval(a)
	if a.over {
		return false, CostLimit, ErrCost
	}
	cost := uint64((a.spent + bytesPerCost - 1) / bytesPerCost)
	if det != nil {
		if c := det.ActualCost(); c != nil {
			cost += *c
		}
	}
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) {
		cost = CostLimit // over CEL's own limit: det may be nil
	}
	if err != nil {
		return false, min(cost, CostLimit), err
	}
	if cost > CostLimit {
		return false, CostLimit, ErrCost
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, cost, ErrNotBool
	}
	return b, cost, nil
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
