// Package rejectlog keeps the bounded log of webhook requests the gateway
// refused (unknown source, bad signature, no event, too large, rate
// limited), so that "why did Stripe's event never arrive?" has an answer
// without the server's logs.
//
// It is built so that a flood can neither grow it nor slow ingest:
// Record never blocks and never touches the store; per minute (of the
// injected clock) it admits at most PerSource records per configured
// source, PerSource for all unknown source names together and PerMinute
// in all, and drops the rest before hashing anything; admitted records
// wait in a queue of Queue (when full, they are dropped) for one writer
// goroutine that stores them in batches; the writer keeps the table to
// the latest KeepKnown records of configured sources and KeepUnknown of
// unknown names. Every drop is counted (Observer) and summed up in the log
// once a minute.
//
// A record holds no body and no header value but User-Agent and the
// values its source's provider names requests by (Options.Identify): see
// anyhook.Rejection and SECURITY.md.
package rejectlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/lifecycle"
)

// Store is what the log writes to: a store.RejectionLog.
type Store interface {
	RecordRejections(ctx context.Context, rs []anyhook.Rejection) error
	PruneRejections(ctx context.Context, keepKnown, keepUnknown int) (int64, error)
}

// Observer is told of every record dropped; it must not block.
type Observer interface {
	// RejectionDropped counts n records dropped for reason: DroppedRate,
	// DroppedQueue or DroppedError.
	RejectionDropped(reason string, n int)
}

// Reasons a record is dropped.
const (
	DroppedRate  = "rate"  // over a per-minute cap
	DroppedQueue = "queue" // the writer is behind: the queue is full
	DroppedError = "error" // the store refused the batch
)

// DropReasons lists the Dropped* reasons.
func DropReasons() []string { return []string{DroppedRate, DroppedQueue, DroppedError} }

// Limits bound the log; a zero field takes its default.
type Limits struct {
	PerSource   int // records per minute per configured source, and for all unknown names together; default 120
	PerMinute   int // records per minute in all; default 600
	Queue       int // records waiting for the writer; default 256
	Batch       int // records per write; default 256
	KeepKnown   int // rows of configured sources kept; default 10,000
	KeepUnknown int // rows of unknown source names kept; default 1,000
	PruneEvery  int // the writer prunes after writing this many records; default 100
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.PerSource, 120)
	def(&l.PerMinute, 600)
	def(&l.Queue, 256)
	def(&l.Batch, 256)
	def(&l.KeepKnown, 10000)
	def(&l.KeepUnknown, 1000)
	def(&l.PruneEvery, 100)
	return l
}

// Options configure a Log.
type Options struct {
	Limits   Limits
	Now      func() time.Time // default time.Now
	Logger   *slog.Logger     // default: discard
	Observer Observer         // may be nil
	// Identify, when set, reads the non-secret values that name a
	// request to a configured source (provider.Identifier); body is nil
	// when it was not read. Record keeps at most 8 of them, cut.
	Identify func(source string, h http.Header, body []byte) []anyhook.RequestID
}

// Limits on what a record keeps of a request.
const (
	maxSource    = 64
	maxUserAgent = 128
	maxMessage   = 256
	maxIDs       = 8
	maxIDName    = 64
	maxIDValue   = 128
	writeTimeout = 10 * time.Second
)

// Log is the rejection log. Create it with New; Start its writer.
type Log struct {
	st    Store
	lim   Limits
	now   func() time.Time
	log   *slog.Logger
	obs   Observer
	ids   func(source string, h http.Header, body []byte) []anyhook.RequestID
	queue chan anyhook.Rejection

	mu      sync.Mutex
	minute  int64          // the minute the counts are of
	counts  map[string]int // admitted this minute, by source ("" for unknown names)
	total   int            // admitted this minute
	dropped map[string]int // dropped this minute, by reason

	run lifecycle.Runner
}

// New returns a Log writing to st.
func New(st Store, opt Options) *Log {
	l := &Log{st: st, lim: opt.Limits.withDefaults(), now: opt.Now, log: opt.Logger, obs: opt.Observer, ids: opt.Identify,
		counts: map[string]int{}, dropped: map[string]int{}}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.queue = make(chan anyhook.Rejection, l.lim.Queue)
	return l
}

// Record notes that a request was refused: rej carries the source name as
// requested, whether it is configured, the reason, the status and the
// message answered, the remote address and, for a body that was not read,
// the announced Content-Length as BodySize (-1: none). Record fills in the
// rest from header (User-Agent, header count and size, the ids of a
// configured source) and from body, the bytes read of the body (nil when
// it was not read in full), which it hashes but does not keep (but for
// an id in it). It never blocks: a record over a cap, or that
// finds the queue full, is dropped and counted.
func (l *Log) Record(rej anyhook.Rejection, header http.Header, body []byte) {
	now := l.now()
	bucket := ""
	if rej.KnownSource {
		bucket = rej.Source
	}
	if !l.admit(now, bucket) {
		return
	}
	rej.ID = 0
	rej.At = now
	rej.IDs = nil
	if rej.KnownSource && l.ids != nil {
		for _, id := range l.ids(rej.Source, header, body) {
			if len(rej.IDs) == maxIDs {
				break
			}
			rej.IDs = append(rej.IDs, anyhook.RequestID{Name: clean(id.Name, maxIDName), Value: clean(id.Value, maxIDValue)})
		}
	}
	rej.Source = clean(rej.Source, maxSource)
	rej.Message = clean(rej.Message, maxMessage)
	rej.RemoteAddr = clean(rej.RemoteAddr, maxSource)
	rej.UserAgent = clean(header.Get("User-Agent"), maxUserAgent)
	rej.HeaderCount, rej.HeaderBytes = 0, 0
	for k, vs := range header {
		for _, v := range vs {
			rej.HeaderCount++
			rej.HeaderBytes += len(k) + len(v) + 4 // "Name: value\r\n"
		}
	}
	if body != nil {
		sum := sha256.Sum256(body)
		rej.BodySize, rej.BodySHA256 = int64(len(body)), hex.EncodeToString(sum[:])
	} else {
		rej.BodySHA256 = ""
		rej.BodySize = max(rej.BodySize, -1)
	}
	select {
	case l.queue <- rej:
	default:
		l.drop(DroppedQueue, 1)
	}
}

// admit counts a record of bucket in the minute of now, if the caps allow
// it; else it counts a drop.
func (l *Log) admit(now time.Time, bucket string) bool {
	minute := now.Unix() / 60
	l.mu.Lock()
	var summary map[string]int
	if minute != l.minute {
		if len(l.dropped) > 0 {
			summary = l.dropped
			l.dropped = map[string]int{}
		}
		l.minute, l.total = minute, 0
		clear(l.counts)
	}
	ok := l.total < l.lim.PerMinute && l.counts[bucket] < l.lim.PerSource
	if ok {
		l.total++
		l.counts[bucket]++
	} else {
		l.dropped[DroppedRate]++
	}
	l.mu.Unlock()
	if summary != nil {
		l.log.Warn("rejection log: records dropped in the last minute (see anyhook_rejections_dropped_total)",
			"rate", summary[DroppedRate], "queue", summary[DroppedQueue], "error", summary[DroppedError])
	}
	if !ok && l.obs != nil {
		l.obs.RejectionDropped(DroppedRate, 1)
	}
	return ok
}

// drop counts n records dropped for reason (other than the rate caps,
// which admit counts).
func (l *Log) drop(reason string, n int) {
	l.mu.Lock()
	l.dropped[reason] += n
	l.mu.Unlock()
	if l.obs != nil {
		l.obs.RejectionDropped(reason, n)
	}
}

// Start starts the writer; Stop stops it. Records made before Start wait
// in the queue. Cancelling ctx does not stop the writer.
func (l *Log) Start(ctx context.Context) {
	l.run.Start(context.WithoutCancel(ctx), l.writer)
}

// Stop writes what is queued and stops the writer. It is idempotent, and
// returns at once for a Log that was never started.
func (l *Log) Stop() { l.run.Stop() }

// writer runs until Stop ends end, then writes what is queued.
func (l *Log) writer(end context.Context) {
	ctx := context.WithoutCancel(end) // a write in progress at Stop completes
	l.prune(ctx)
	written := 0
	flush := func(batch []anyhook.Rejection) {
		l.writeBatch(ctx, batch)
		if written += len(batch); written >= l.lim.PruneEvery {
			l.prune(ctx)
			written = 0
		}
	}
	for {
		select {
		case first := <-l.queue:
			flush(l.take([]anyhook.Rejection{first}))
		case <-end.Done():
			for batch := l.take(nil); len(batch) > 0; batch = l.take(nil) {
				flush(batch)
			}
			return
		}
	}
}

// take adds to batch what is queued, up to a batch.
func (l *Log) take(batch []anyhook.Rejection) []anyhook.Rejection {
	for len(batch) < l.lim.Batch {
		select {
		case r := <-l.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

func (l *Log) writeBatch(ctx context.Context, batch []anyhook.Rejection) {
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := l.st.RecordRejections(wctx, batch); err != nil {
		l.drop(DroppedError, len(batch))
		l.log.Warn("rejection log: could not store records", "records", len(batch), "err", err)
	}
}

func (l *Log) prune(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if _, err := l.st.PruneRejections(pctx, l.lim.KeepKnown, l.lim.KeepUnknown); err != nil {
		l.log.Warn("rejection log: could not prune", "err", err)
	}
}

// clean makes s fit a record: valid UTF-8, control characters replaced
// by '?', at most n bytes (cut at a character boundary).
func clean(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
