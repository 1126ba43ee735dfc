package route

import (
	"math"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// paths is what an expression reads of body: the parts of the JSON a
// decoding must materialise for the expression to evaluate as it would on
// the whole body. A node is one of three kinds:
//
//   - whole: the value is used as a value (compared, passed to a function,
//     iterated by a macro), so it is decoded in full;
//   - partial (fields or items set): only some of its keys or constant
//     list indexes are read; other keys are left out of the object, and a
//     list keeps its first maxItem+1 elements, those not read standing as
//     null;
//   - presence (nothing set): only has() looks at it, so the key is kept
//     with null for its value;
//   - iterated (each set): a macro iterates it (body.items.exists(i,
//     i.amount > 10)): a list keeps every element, each decoded as each
//     reads it (merged with items[n] for the constant indexes also read);
//     an object keeps every key (the macro's variable is the key), its
//     value decoded as fields reads it, else null.
//
// A scalar (string, number, boolean, null) at a partial or presence node is
// decoded as it is: reading a field of it fails the same whatever it holds.
type paths struct {
	name    string // the key this node is under, when it is under one
	whole   bool
	fields  map[string]*paths
	items   map[int]*paths
	maxItem int    // the largest key of items, when items is not nil
	each    *paths // what a macro's variable reads of every element
}

func (p *paths) field(name string) *paths {
	if p.fields == nil {
		p.fields = map[string]*paths{}
	}
	c := p.fields[name]
	if c == nil {
		c = &paths{name: name}
		p.fields[name] = c
	}
	return c
}

func (p *paths) item(i int) *paths {
	if p.items == nil {
		p.items = map[int]*paths{}
		p.maxItem = i
	}
	c := p.items[i]
	if c == nil {
		c = &paths{}
		p.items[i] = c
		p.maxItem = max(p.maxItem, i)
	}
	return c
}

// presence reports whether only has() reads the value.
func (p *paths) presence() bool {
	return !p.whole && p.fields == nil && p.items == nil && p.each == nil
}

// every is the node of what is read of each element of p.
func (p *paths) every() *paths {
	if p.each == nil {
		p.each = &paths{}
	}
	return p.each
}

// merge adds what q reads to p (q is left as it is, and shared by none of
// p's nodes).
func (p *paths) merge(q *paths) {
	p.whole = p.whole || q.whole
	for k, c := range q.fields {
		p.field(k).merge(c)
	}
	for i, c := range q.items {
		p.item(i).merge(c)
	}
	if q.each != nil {
		p.every().merge(q.each)
	}
}

// settle merges, at every node that is iterated and also read at
// constant indexes, what is read of each element into those indexes:
// the decoder then reads element n by items[n] alone.
func (p *paths) settle() {
	if p.each != nil {
		p.each.settle()
		for _, c := range p.items {
			c.merge(p.each)
		}
	}
	for _, c := range p.fields {
		c.settle()
	}
	for _, c := range p.items {
		c.settle()
	}
}

// bodyPaths collects what e (a checked expression) reads of the variable
// body.
func bodyPaths(e ast.Expr) *paths {
	// A macro's variable named body ([1].exists(body, body > 0)) is
	// taken for the variable: what it reads is read in vain, never
	// missed.
	root := &paths{}
	w := walker{root: root}
	w.walk(e)
	root.settle()
	return root
}

// walker walks an expression; scope binds the variables of the macros
// around the node it is at to what they read (nil: nothing of body).
type walker struct {
	root  *paths
	scope []binding
}

type binding struct {
	name string
	p    *paths
}

// ident is the node the identifier name reads: a macro's variable's, the
// innermost first, else body's, else nil.
func (w *walker) ident(name string) *paths {
	for i := len(w.scope) - 1; i >= 0; i-- {
		if w.scope[i].name == name {
			return w.scope[i].p
		}
	}
	if name == "body" {
		return w.root
	}
	return nil
}

// reads returns the node of e when e is body followed by field selections
// and constant indexes (body.a["b"][0]), creating the nodes on the way;
// nil for any other expression.
func (w *walker) reads(e ast.Expr) *paths {
	switch e.Kind() {
	case ast.IdentKind:
		return w.ident(e.AsIdent())
	case ast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() {
			return nil
		}
		if p := w.reads(s.Operand()); p != nil {
			return p.field(s.FieldName())
		}
	case ast.CallKind:
		c := e.AsCall()
		args := c.Args()
		if c.FunctionName() != operators.Index || c.IsMemberFunction() || len(args) != 2 || args[1].Kind() != ast.LiteralKind {
			return nil
		}
		if p := w.reads(args[0]); p != nil {
			return index(p, args[1].AsLiteral())
		}
	}
	return nil
}

// index is the node p[key] for a constant key: a string is an object's
// key, a non-negative integral number a list's index. Any other key (a
// boolean, a fraction, a negative index) gives the same answer whatever
// the value holds (an error, or no such key), so it reads nothing: its
// node is detached.
func index(p *paths, key any) *paths {
	switch k := key.(type) {
	case types.String:
		return p.field(string(k))
	case types.Int:
		if k >= 0 {
			return p.item(int(k))
		}
	case types.Uint:
		if k <= math.MaxInt64 {
			return p.item(int(k))
		}
	case types.Double:
		// CEL takes a double as an index when it converts to an int64
		// without loss.
		if k >= 0 && k < math.MaxInt64 && float64(int64(k)) == float64(k) {
			return p.item(int(k))
		}
	}
	// The value's kind still decides the error.
	if p.fields == nil {
		p.fields = map[string]*paths{}
	}
	return &paths{}
}

func (w *walker) walk(e ast.Expr) {
	if p := w.reads(e); p != nil {
		p.whole = true
		return
	}
	switch e.Kind() {
	case ast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() {
			if p := w.reads(s.Operand()); p != nil {
				p.field(s.FieldName())
				return
			}
		}
		w.walk(s.Operand())
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			w.walk(c.Target())
		}
		for _, a := range c.Args() {
			w.walk(a)
		}
	case ast.ComprehensionKind:
		w.comprehension(e.AsComprehension())
	case ast.ListKind:
		for _, x := range e.AsList().Elements() {
			w.walk(x)
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			if en.Kind() == ast.MapEntryKind {
				w.walk(en.AsMapEntry().Key())
				w.walk(en.AsMapEntry().Value())
			}
		}
	case ast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			if f.Kind() == ast.StructFieldKind {
				w.walk(f.AsStructField().Value())
			}
		}
	}
}

// comprehension walks a macro (exists, all, map, filter, …): when it
// iterates a part of body with one variable, what the variable reads is
// read of every element of that part (paths.each), and the part is not
// decoded whole.
func (w *walker) comprehension(c ast.ComprehensionExpr) {
	var elem *paths
	if r := w.reads(c.IterRange()); r != nil && !c.HasIterVar2() {
		elem = r.every()
	} else {
		w.walk(c.IterRange())
		// With two variables (index or key, and value), or over what is
		// not a part of body, the variables read nothing of body that
		// the range does not already.
	}
	w.walk(c.AccuInit())
	w.scope = append(w.scope, binding{c.AccuVar(), nil})
	w.walk(c.Result())
	w.scope = append(w.scope, binding{c.IterVar(), elem})
	if c.HasIterVar2() {
		w.scope = append(w.scope, binding{c.IterVar2(), nil})
	}
	w.walk(c.LoopCondition())
	w.walk(c.LoopStep())
	w.scope = w.scope[:len(w.scope)-2]
	if c.HasIterVar2() {
		w.scope = w.scope[:len(w.scope)-1]
	}
}
