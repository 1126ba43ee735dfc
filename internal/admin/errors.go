package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// maxBody bounds every request body.
const maxBody = 1 << 20

// Error is an error with its HTTP answer: a status, a stable code and a
// message safe to show the client.
type Error struct {
	Status  int
	Code    string
	Message string
	// Details, when set, is rendered as the error's "details": what the
	// client needs to act on it (the candidates of an ambiguous id, the
	// destinations a replay would send into while they fail).
	Details any
}

func (e *Error) Error() string { return e.Message }

// badParam is a 400 naming the query parameter or body field at fault.
func badParam(name, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_parameter",
		Message: name + ": " + fmt.Sprintf(format, args...)}
}

// kinds is the one table from error kinds to HTTP answers. The message of
// not-found and invalid errors is shown (the store words them for people);
// the others get a fixed message and their detail goes to the log.
var kinds = []struct {
	err         error
	status      int
	code        string
	showMessage bool
}{
	{anyhook.ErrNotFound, http.StatusNotFound, "not_found", true},
	{anyhook.ErrInvalid, http.StatusBadRequest, "invalid", true},
	{anyhook.ErrPruned, http.StatusConflict, "body_pruned", true},
	{anyhook.ErrUnavailable, http.StatusServiceUnavailable, "unavailable", false},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "unavailable", false},
}

// classify maps err to the answer the client gets.
func classify(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
			Message: fmt.Sprintf("request body over %d bytes", tooBig.Limit)}
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			msg := http.StatusText(k.status)
			if k.status == http.StatusServiceUnavailable {
				msg = "store unavailable; try again"
			}
			if k.showMessage {
				msg = err.Error()
			}
			return &Error{Status: k.status, Code: k.code, Message: msg}
		}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
}

// handlerFunc is an endpoint: it writes a success itself and returns any
// failure for adapt to render.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// adapt turns a handlerFunc into an http.Handler: it renders a returned
// error (unless the handler already began its answer) and logs it.
func (a *API) adapt(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := CheckURL(r.URL); err != nil {
			a.render(w, r, err)
			return
		}
		start := a.now()
		tw := &trackingWriter{ResponseWriter: w}
		err := h(tw, r)
		if err == nil {
			return
		}
		err = &timedError{err: err, took: a.now().Sub(start)}
		if tw.wrote {
			// The answer is on its way; all that is left is to say why it broke.
			a.log.LogAttrs(r.Context(), slog.LevelDebug, "admin: writing response",
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("err", err.Error()))
			return
		}
		a.render(w, r, err)
	})
}

// CheckURL refuses a URL whose path or query, decoded, is not text that
// the stores keep (store.TextProblem): no id, name or key they hold has
// such bytes, and PostgreSQL would fail the lookup (503) where SQLite
// finds nothing. The dashboard refuses its URLs with it too.
func CheckURL(u *url.URL) *Error {
	if p := store.TextProblem(u.Path); p != "" {
		return &Error{Status: http.StatusBadRequest, Code: "invalid", Message: "the URL path " + p}
	}
	q := u.Query()
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if p := store.TextProblem(name); p != "" {
			return &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Message: "a query parameter's name " + p}
		}
		for _, v := range q[name] {
			if p := store.TextProblem(v); p != "" {
				return badParam(name, "%s", p)
			}
		}
	}
	return nil
}

// render writes err as a JSON error and logs what the client is not told.
func (a *API) render(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	level := slog.LevelDebug
	if e.Status >= 500 {
		level = slog.LevelError
		if r.Context().Err() != nil {
			level = slog.LevelDebug // the client went away
		}
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", e.Status), slog.String("code", e.Code), slog.String("err", err.Error())}
	var te *timedError
	if errors.As(err, &te) {
		attrs = append(attrs, slog.Duration("took", te.took))
	}
	a.log.LogAttrs(r.Context(), level, "admin: request failed", attrs...)
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details any    `json:"details,omitempty"`
	}
	writeJSON(w, e.Status, struct {
		Error body `json:"error"`
	}{body{e.Code, e.Message, e.Details}})
}

// writeJSON writes v as the JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // a JSON API, not HTML: keep <, > and & readable
	if err := enc.Encode(v); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// decodeBody decodes the request body (at most maxBody bytes, no unknown
// fields, one JSON value) into v. An empty body leaves v as it is.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	return decodeJSON(r.Body, v)
}

// decodeJSON is decodeBody without the HTTP: strict, one value, empty is
// fine. Its errors are all 400s (or 413 through classify).
func decodeJSON(rd io.Reader, v any) error {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty body: every field omitted
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return &Error{Status: http.StatusBadRequest, Code: "invalid_json",
				Message: fmt.Sprintf("request body: field %q: got a JSON %s, want %s", typeErr.Field, typeErr.Value, jsonKind(typeErr.Type.Kind()))}
		}
		return &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "request body: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "request body: more than one JSON value"}
	}
	return nil
}

// jsonKind names a Go kind the way a JSON user would.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a number"
}

// timedError carries how long the failed request took, for the log.
type timedError struct {
	err  error
	took time.Duration
}

func (e *timedError) Error() string { return e.err.Error() }
func (e *timedError) Unwrap() error { return e.err }

// trackingWriter notes whether the answer has begun.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
