// Package syncio makes an io.Writer safe for writers in several
// goroutines (a process's stderr copied in while the caller writes too).
package syncio

import (
	"bytes"
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

// Buffer is a bytes.Buffer that goroutines may write and read at once (a
// log written by the code under test and read by the test).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
