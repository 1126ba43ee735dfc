package config

import (
	"fmt"
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
