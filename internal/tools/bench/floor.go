package bench

import (
	"context"
	"encoding/binary"
	"errors"
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
// --destinations D --dir DIR --queue N --log-size BYTES`: the durable
// floor. It reads each body, writes it to a log file in DIR in group
// commits (the gateway's own internal/groupcommit, batches of up to
// floorBatch) each synced with fsync, as SQLite syncs its WAL, answers
// 200, then forwards the body from memory to the sink as the relay does.
// No dedup, no index, no retries, no record of deliveries, and a log
// that is overwritten: what an open-loop run's tail is on this machine
// with a synced local commit and a delivery and nothing else, not a
// store. It runs in a process of its own, as the gateway does, and
// answers the same commands (usage, procs, profile, trace).
const floorCommand = "_floor"

// floorBatch is the most bodies a commit holds: the gateway's default
// ingest batch.
const floorBatch = 256

// floorLogSize is the least size of the floor's log; the bench asks for
// more when floorBatch bodies would not fit twice.
const floorLogSize = 64 << 20

func floorMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("bench " + floorCommand)
	sinkURL := fs.String("sink", "", "")
	dests := fs.Int("destinations", 1, "")
	dir := fs.String("dir", "", "")
	queue := fs.Int("queue", 1, "")
	size := fs.Int64("log-size", floorLogSize, "")
	if err := cli.Parse(fs, args); err != nil || *sinkURL == "" || *dir == "" {
		fmt.Fprintf(stderr, "anyhook bench %s: want --sink URL --dir DIR (%v)\n", floorCommand, err)
		return 2
	}
	// As anyhook serve does.
	procs.AtLeastTwo()
	if percent, _, _ := procs.TuneGC(); percent != 0 {
		go procs.FollowHeap(ctx)
	}
	fl, err := startFloor(ctx, filepath.Join(*dir, "floor.log"), *size, (*os.File).Sync, strings.TrimSuffix(*sinkURL, "/"), *dests, *queue)
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench %s: %v\n", floorCommand, err)
		return 2
	}
	fmt.Fprintf(stdout, "listening %s\n", strings.TrimPrefix(fl.url, "http://"))
	answerCommands(stdin, stdout, func(string, string) (string, bool) { return "", false })
	return stopChild(ctx, stderr, floorCommand, fl.close)
}

// floor is the durable floor's server: a relay whose bodies are committed
// to a floorLog before they are answered.
type floor struct {
	*relay
	log *floorLog
	gc  *groupcommit.Committer[[]byte, struct{}]
}

// startFloor creates the log at path (size bytes, synced with sync) and
// serves on 127.0.0.1, forwarding to sinkURL/d0 … d(dests-1).
func startFloor(ctx context.Context, path string, size int64, sync func(*os.File) error, sinkURL string, dests, queue int) (*floor, error) {
	lg, err := openFloorLog(path, size, sync)
	if err != nil {
		return nil, err
	}
	// Whole: a failed write or sync fails its batch; retried body by
	// body, it could write a body twice or report a sync that was not.
	gc := groupcommit.New(lg.commit, groupcommit.Options[[]byte]{Max: floorBatch, Whole: func(error) bool { return true }})
	gc.Start(context.WithoutCancel(ctx))
	rl, err := newRelay(sinkURL, dests, queue, func(ctx context.Context, body []byte) error {
		_, err := gc.Submit(ctx, body)
		return err
	})
	if err != nil {
		gc.Stop()
		lg.f.Close()
		return nil, err
	}
	return &floor{relay: rl, log: lg, gc: gc}, nil
}

// close stops the server (its handlers wait for their commits), then
// the committer, then closes the log.
func (f *floor) close(ctx context.Context) error {
	err := f.relay.close(ctx)
	f.gc.Stop()
	return errors.Join(err, f.log.f.Close())
}

// floorLog is the floor's log file: written once with zeros and synced
// before the run, then overwritten in place, from its start whenever the
// next batch would pass its end. A file that grew with every commit
// would make each sync also commit the file's new size to the journal.
// Each body is its length (a uvarint) and its bytes.
type floorLog struct {
	f    *os.File
	size int64
	sync func(*os.File) error
	off  int64
	buf  []byte
}

func openFloorLog(path string, size int64, sync func(*os.File) error) (*floorLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size && err == nil; off += int64(len(zeros)) {
		_, err = f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off)
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
	return &floorLog{f: f, size: size, sync: sync}, nil
}

// commit is the floor's group commit: one write and one sync.
func (l *floorLog) commit(_ context.Context, bodies [][]byte) ([]struct{}, error) {
	l.buf = l.buf[:0]
	for _, b := range bodies {
		l.buf = binary.AppendUvarint(l.buf, uint64(len(b)))
		l.buf = append(l.buf, b...)
	}
	n := int64(len(l.buf))
	if n > l.size {
		return nil, fmt.Errorf("a batch of %d bytes does not fit the floor's log of %d", n, l.size)
	}
	if l.off+n > l.size {
		l.off = 0
	}
	if _, err := l.f.WriteAt(l.buf, l.off); err != nil {
		return nil, err
	}
	if err := l.sync(l.f); err != nil {
		return nil, err
	}
	l.off += n
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
