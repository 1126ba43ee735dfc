// Package syncio makes an io.Writer safe for writers in several
// goroutines (a process's stderr copied in while the caller writes too).
package syncio

import (
	"io"
	"sync"
)

// Writer writes to W one Write at a time. Its zero value, with W set, is
// ready to use.
type Writer struct {
	W  io.Writer
	mu sync.Mutex
}

// Write writes p to W, after any Write already under way.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.W.Write(p)
}
