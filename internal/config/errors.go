package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is a configuration problem. It prints as one line:
//
//	FILE:LINE: KEY: message
//
// with LINE left out when unknown and KEY left out for problems with the
// file as a whole.
type Error struct {
	File string // the config file as given
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key path, e.g. "sources.orders.signature"; "" for the file
	Msg  string
	Err  error // the underlying cause, if any

	meant string // an unknown key's suggestion: the key likely meant
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return oneLine(b.String())
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error about key (a dotted path such as
// "sources.orders.signature"), located at the line of key in the file, or
// at the line of its nearest enclosing key when key itself was not written.
// Other packages use it to report problems the config package cannot see
// (a provider's secrets, for one) in the same shape.
func (c *Config) Errorf(key, format string, args ...any) error {
	return &Error{File: c.fileName(), Line: c.Line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Line returns the line of key, or of its nearest enclosing key that was
// written in the file; 0 when none was.
func (c *Config) Line(key string) int {
	for {
		if l, ok := c.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return 0
		}
		key = key[:i]
	}
}

// has reports whether key was written in the file.
func (c *Config) has(key string) bool {
	_, ok := c.lines[key]
	return ok
}

func (c *Config) fileName() string {
	if c.Path == "" {
		return "config"
	}
	return c.Path
}

// oneLine keeps error messages on one line whatever they quote.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	parts := strings.Split(s, "\n")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// Errors is every problem found in one file, in line order (problems
// with the file as a whole first). It prints one problem per line; each
// line is an *Error, which errors.As finds (the first one).
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, for errors.As and errors.Is.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// List returns the problems in err, in line order: the elements of an
// Errors, or err itself as an *Error (nil for other errors and nil).
func List(err error) []*Error {
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	var e *Error
	if errors.As(err, &e) {
		return []*Error{e}
	}
	return nil
}

// Join returns the problems of errs (each an *Error, an Errors, or any
// other error, kept as a problem with the file as a whole) as one Errors
// in line order; nil when there are none. The wiring checks what config
// cannot (a provider's secret form) with it, so that config check lists
// those with the rest.
func Join(errs ...error) error {
	var p problems
	for _, err := range errs {
		p.add(err)
	}
	return p.err()
}

// problems collects the errors of independent checks, so that one file's
// every mistake is reported at once.
type problems []*Error

// add keeps err's problems: an *Error, an Errors, or (from outside the
// package) any other error, kept as a problem with the file as a whole.
func (p *problems) add(err error) {
	if err == nil {
		return
	}
	if es := List(err); es != nil {
		*p = append(*p, es...)
		return
	}
	*p = append(*p, &Error{File: "config", Msg: err.Error(), Err: err})
}

// err returns the problems in line order as an Errors, or nil.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	es := slices.Clone(p)
	slices.SortStableFunc(es, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	return Errors(es)
}
