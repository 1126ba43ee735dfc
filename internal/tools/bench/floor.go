package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/groupcommit"
	"github.com/anyhook/anyhook/internal/procs"
)

// floorCommand is the hidden `anyhook bench _floor --sink URL
// --destinations D --dir DIR --queue N`: the durable floor, the least a
// gateway that keeps its first promise must do. It reads each body,
// appends it to a file in DIR in group commits (the gateway's own
// internal/groupcommit, batches of up to floorBatch) made durable with
// fdatasync, answers 200, then forwards the body from memory to the sink
// as the relay does. No dedup, no index, no retries: what an open-loop
// run's tail is on this machine when a durable commit and a delivery are
// all there is. It runs in a process of its own, as the gateway does,
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
	f, err := os.OpenFile(filepath.Join(*dir, "floor.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench %s: %v\n", floorCommand, err)
		return 2
	}
	defer f.Close()
	var buf []byte
	gc := groupcommit.New(func(_ context.Context, bodies [][]byte) ([]struct{}, error) {
		buf = buf[:0]
		for _, b := range bodies {
			buf = binary.AppendUvarint(buf, uint64(len(b)))
			buf = append(buf, b...)
		}
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		if err := datasync(f); err != nil {
			return nil, err
		}
		return make([]struct{}, len(bodies)), nil
	}, groupcommit.Options[[]byte]{Max: floorBatch})
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
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := rl.close(sctx); err != nil {
		fmt.Fprintf(stderr, "anyhook bench %s: stop: %v\n", floorCommand, err)
		return 1
	}
	return 0
}
