package cli

import (
	"context"
	"log/slog"
)

// Only returns a handler that passes on to h the records keep accepts: a
// command that runs a gateway's parts prints the few of its records that
// concern it (an upgrade of the store, why requests were shed).
func Only(h slog.Handler, keep func(slog.Record) bool) slog.Handler {
	return only{h, keep}
}

type only struct {
	slog.Handler
	keep func(slog.Record) bool
}

func (h only) Handle(ctx context.Context, r slog.Record) error {
	if !h.keep(r) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h only) WithAttrs(as []slog.Attr) slog.Handler { return only{h.Handler.WithAttrs(as), h.keep} }

func (h only) WithGroup(name string) slog.Handler { return only{h.Handler.WithGroup(name), h.keep} }
