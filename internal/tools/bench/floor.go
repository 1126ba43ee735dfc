package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/groupcommit"
	"github.com/anyhook/anyhook/internal/procs"
)

// floorCommand is the hidden `anyhook bench _floor --sink URL
// --destinations D --dir DIR --queue N`: the durable floor. It reads each
// body, writes it to a log file in DIR in group commits (the gateway's
// own internal/groupcommit, batches of up to floorBatch) made durable
// with fdatasync, answers 200, then forwards the body from memory to the
// sink as the relay does. No dedup, no index, no retries: an open-loop
// run's tail on this machine with a local durable commit and a delivery
// and nothing else. It runs in a process of its own, as the gateway does,
// and answers the same commands (usage, procs, profile, trace).
const floorCommand = "_floor"

// floorBatch is the most bodies a commit holds: the gateway's default
// ingest batch.
const floorBatch = 256

func floorMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("bench " + floorCommand)
	sinkURL := fs.String("sink", "", "")
	dests := fs.Int("destinations", 1, "")
	dir := fs.String("dir", "", "")
	queue := fs.Int("queue", 1, "")
	if err := cli.Parse(fs, args); err != nil || *sinkURL == "" || *dir == "" {
		fmt.Fprintf(stderr, "anyhook bench %s: want --sink URL --dir DIR (%v)\n", floorCommand, err)
		return 2
	}
	procs.AtLeastTwo() // as anyhook serve does
	lg, err := openFloorLog(filepath.Join(*dir, "floor.log"))
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench %s: %v\n", floorCommand, err)
		return 2
	}
	defer lg.f.Close()
	// Whole: a failed write or fdatasync fails its batch; retried body
	// by body, it could write a body twice or report a sync that was not.
	gc := groupcommit.New(lg.commit, groupcommit.Options[[]byte]{Max: floorBatch, Whole: func(error) bool { return true }})
	gc.Start(context.WithoutCancel(ctx))
	defer gc.Stop()
	rl, err := newRelay(strings.TrimSuffix(*sinkURL, "/"), *dests, *queue, func(ctx context.Context, body []byte) error {
		_, err := gc.Submit(ctx, body)
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench %s: %v\n", floorCommand, err)
		return 2
	}
	fmt.Fprintf(stdout, "listening %s\n", strings.TrimPrefix(rl.url, "http://"))
	answerCommands(stdin, stdout, func(string, string) (string, bool) { return "", false })
	return stopChild(ctx, stderr, floorCommand, rl.close)
}

// floorLogSize is the floor's log file: written once with zeros and made
// durable before the run, then overwritten in place from its start
// whenever the next batch would pass its end, as SQLite reuses its WAL
// after a checkpoint. A file that grew with every commit would make each
// fdatasync also commit the file's new size to the journal.
const floorLogSize = 64 << 20

// floorLog is the floor's log: each body as its length (a uvarint) and
// its bytes; zeros after the last.
type floorLog struct {
	f   *os.File
	off int64
	buf []byte
}

func openFloorLog(path string) (*floorLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < floorLogSize && err == nil; off += int64(len(zeros)) {
		_, err = f.WriteAt(zeros, off)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("the floor's log: %w", err)
	}
	return &floorLog{f: f}, nil
}

// commit is the floor's group commit: one write and one fdatasync.
func (l *floorLog) commit(_ context.Context, bodies [][]byte) ([]struct{}, error) {
	l.buf = l.buf[:0]
	for _, b := range bodies {
		l.buf = binary.AppendUvarint(l.buf, uint64(len(b)))
		l.buf = append(l.buf, b...)
	}
	if l.off+int64(len(l.buf)) > floorLogSize {
		l.off = 0
	}
	if _, err := l.f.WriteAt(l.buf, l.off); err != nil {
		return nil, err
	}
	if err := datasync(l.f); err != nil {
		return nil, err
	}
	l.off += int64(len(l.buf))
	return make([]struct{}, len(bodies)), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
