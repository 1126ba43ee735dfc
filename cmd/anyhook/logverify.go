package main

import (
	"context"
	"errors"
	"io"
)

// logVerify is filled in by the tamper-evident log.
func logVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return fail(stderr, exitUsage, errors.New("log verify: the tamper-evident log is not built yet"))
}
