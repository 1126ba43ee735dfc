package syncio_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/anyhook/anyhook/internal/testkit/syncio"
)

// Writes from many goroutines at once reach the one bytes.Buffer whole and
// one at a time (run with -race: an unlocked Write is a data race).
func TestConcurrentWrites(t *testing.T) {
	var buf bytes.Buffer
	w := &syncio.Writer{W: &buf}
	const goroutines, lines = 16, 100
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range lines {
				if n, err := w.Write([]byte("line\n")); n != 5 || err != nil {
					t.Errorf("Write = %d, %v", n, err)
				}
			}
		})
	}
	wg.Wait()
	if got, want := buf.String(), strings.Repeat("line\n", goroutines*lines); got != want {
		t.Fatalf("%d bytes written, want %d, every line whole", len(got), len(want))
	}
}

// A Buffer read while it is written (run with -race).
func TestBufferReadWhileWritten(t *testing.T) {
	var b syncio.Buffer
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 100 {
			b.Write([]byte("x"))
		}
	})
	for b.String() != strings.Repeat("x", 100) {
	}
	wg.Wait()
}
