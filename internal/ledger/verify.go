package ledger

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Kinds of Problem.
const (
	KindBodyChanged    = "body changed"
	KindHeadersChanged = "headers changed"
	KindFieldsChanged  = "receive time, source, dedup key or id changed"
	KindDeleted        = "deleted"
	KindInserted       = "inserted"
	KindEntryChanged   = "log entry changed"
	KindCheckpoint     = "bad checkpoint"
	KindRewritten      = "log rewritten"
	// KindMissingCheckpoint: ledger entries that no stored checkpoint covers
	// although they were sequenced long ago (VerifyOptions.CheckpointGrace).
	KindMissingCheckpoint = "missing checkpoint"
	// KindPrunedEarly: a body emptied and marked pruned that retention
	// could not have pruned (VerifyOptions.Retention, or a delivery that
	// still needs it).
	KindPrunedEarly = "body removed"
)

// RetainForever as VerifyOptions.Retention says bodies are never pruned
// (log.retention: 0s): every pruned body is reported.
const RetainForever = time.Duration(math.MaxInt64)

// Problem is one finding of Verify.
type Problem struct {
	EventID string // the AnyHook event id; "" when it concerns the whole log
	Index   int64  // ledger position; -1 when the event has none
	Kind    string
	Detail  string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.EventID != "" {
		b.WriteString("event " + p.EventID)
		if p.Index >= 0 {
			fmt.Fprintf(&b, " (log index %d)", p.Index)
		}
	} else if p.Index >= 0 {
		fmt.Fprintf(&b, "log index %d", p.Index)
	} else {
		b.WriteString("log")
	}
	b.WriteString(": " + p.Kind)
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	return b.String()
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Verifier checks checkpoint signatures (the ledger's public key).
	Verifier note.Verifier
	// Origin is the expected checkpoint origin; "" accepts any.
	Origin string
	// Since is an older signed checkpoint (a file a witness or a user
	// kept): Verify then also proves the ledger only grew since.
	Since []byte
	// Lag: an event without a ledger position received longer ago than this
	// is reported as inserted; default DefaultLag.
	Lag time.Duration
	// CheckpointGrace: ledger entries that no stored checkpoint covers,
	// sequenced longer ago than this, are reported (checkpoints were
	// deleted, or no checkpointer is running); default
	// DefaultCheckpointGrace.
	CheckpointGrace time.Duration
	// Retention is log.retention, the age before which retention never
	// empties a body: a pruned body of an event received less than
	// Retention minus Lag (for clock skew) before Now is reported.
	// RetainForever reports every pruned body; 0 checks no ages. Pruned
	// bodies that a delivery still needs are reported in any case.
	Retention time.Duration
	Now       func() time.Time
}

// DefaultCheckpointGrace is how long a ledger entry may stay outside every
// signed checkpoint before Verify reports it. A running checkpointer signs
// within log.checkpoint_interval (10 s by default) and a clean stop signs
// what is left, so an hour is only exceeded when checkpoints were deleted or
// the gateway stopped abruptly and has not run since; it leaves ample room
// for clock skew between the database and the verifying host.
const DefaultCheckpointGrace = time.Hour

// maxListed bounds how many checkpoints of one kind of problem are named
// one by one; the rest are counted.
const maxListed = 3

// Report is the result of Verify.
type Report struct {
	Entries    int64 // log size
	Checkpoint *Tree // the latest stored checkpoint, when it verified
	Since      *Tree // Options.Since, when it verified
	Pruned     int64 // entries whose body was pruned
	Waiting    int   // events not yet in the ledger, younger than Lag
	Problems   []Problem
}

// OK reports whether the ledger verified.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Summary is a one-line account of a ledger that verified.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log intact: %d events", r.Entries)
	if r.Checkpoint != nil {
		fmt.Fprintf(&b, ", signed checkpoint at size %d (root %s)", r.Checkpoint.Size, base64.StdEncoding.EncodeToString(r.Checkpoint.Root[:]))
	} else {
		b.WriteString(", no checkpoint yet")
	}
	if r.Since != nil {
		fmt.Fprintf(&b, ", consistent with the given checkpoint at size %d", r.Since.Size)
	}
	if r.Pruned > 0 {
		fmt.Fprintf(&b, ", %d bodies pruned (hashes kept)", r.Pruned)
	}
	if r.Waiting > 0 {
		fmt.Fprintf(&b, ", %d events waiting for a log position", r.Waiting)
	}
	return b.String()
}

// ErrVerify is returned by Verify when the ledger could not be read at all
// (as opposed to a ledger that was read and found wrong, which is a Report
// with Problems).
var ErrVerify = errors.New("log verify")

const verifyPage = 500

// Verify recomputes the ledger from the stored events: every leaf from its
// event, the tree from the leaves, and against it every stored checkpoint
// (signature, origin, root at its size; sizes never shrinking from one
// checkpoint to the next); entries left out of every checkpoint for longer
// than Options.CheckpointGrace; and, with Options.Since, that the ledger only
// grew since that checkpoint. It names each event that does not match.
func Verify(ctx context.Context, st store.Ledger, opt VerifyOptions) (*Report, error) {
	v := newVerifier(st, opt)
	if err := v.openCheckpoints(ctx); err != nil {
		return nil, err
	}
	v.checkSizes()
	if err := v.recompute(ctx); err != nil {
		return nil, err
	}
	v.checkRoots(ctx)
	v.checkCoverage()
	if err := v.checkPruned(ctx); err != nil {
		return nil, err
	}
	if err := v.checkUnsequenced(ctx); err != nil {
		return nil, err
	}
	return v.rep, nil
}

// verifier is one run of Verify. Each phase is a method, in the order
// Verify calls them; each reads what the earlier ones left in the fields
// and adds its findings to rep.
type verifier struct {
	st  store.Ledger
	opt VerifyOptions
	now time.Time
	rep *Report

	// openCheckpoints
	size  int64     // entries in the ledger
	chain *keyChain // the keys checkpoints were signed with
	cps   []signed  // the stored checkpoints that verified, oldest first

	// checkSizes
	covered int64 // entries [0, covered) are in some signed checkpoint

	// recompute
	tree           rootStack
	roots          map[int64]tlog.Hash // the events' root at each checkpoint's size
	reached        int64               // short of size when entries at the end are gone
	uncoveredSince time.Time           // when the oldest entry no checkpoint covers was sequenced
	storedLeaves   bool                // the stored tree's leaves can be read
	timed          []signedAt          // signed times by size, for lateness
	nextTimed      int                 // the first of timed not yet reached
	judge          signedAt            // the latest signed time among checkpoints of size <= the current index
}

// signed is a stored checkpoint that verified.
type signed struct {
	n int // position among the stored checkpoints, from 1
	Tree
}

// signedAt is when a checkpoint of size entries was signed.
type signedAt struct {
	size int64
	at   time.Time
	what string
}

func newVerifier(st store.Ledger, opt VerifyOptions) *verifier {
	if opt.Lag <= 0 {
		opt.Lag = DefaultLag
	}
	if opt.CheckpointGrace <= 0 {
		opt.CheckpointGrace = DefaultCheckpointGrace
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &verifier{st: st, opt: opt, now: opt.Now(), rep: &Report{}}
}

func (v *verifier) add(p Problem) { v.rep.Problems = append(v.rep.Problems, p) }

// problemf adds a problem of the whole ledger (no event, no position).
func (v *verifier) problemf(kind, format string, args ...any) {
	v.add(Problem{Index: -1, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// open opens one signed checkpoint with verifier key and checks its origin.
func (v *verifier) open(msg []byte, key note.Verifier) (*Tree, error) {
	t, err := OpenCheckpoint(msg, key)
	if err != nil {
		return nil, err
	}
	if v.opt.Origin != "" && t.Origin != v.opt.Origin {
		return nil, fmt.Errorf("it is for log %q, not %q", t.Origin, v.opt.Origin)
	}
	return &t, nil
}

// foreign says why the given checkpoint msg did not verify (err): when no
// key of the log's signed it, it names its signers and the log's keys,
// as a checkpoint of another log (or a log and key both replaced) looks.
func (v *verifier) foreign(msg []byte, err error) string {
	why := strings.TrimPrefix(err.Error(), ErrBadCheckpoint.Error()+": ")
	var signers, ours []string
	for _, line := range strings.Split(string(msg), "\n") {
		rest, ok := strings.CutPrefix(line, "— ")
		name, sig, _ := strings.Cut(rest, " ")
		if b, err := base64.StdEncoding.DecodeString(sig); ok && err == nil && len(b) >= 4 {
			signers = append(signers, fmt.Sprintf("%s+%08x", name, binary.BigEndian.Uint32(b)))
		}
	}
	for _, k := range v.chain.trusted {
		ours = append(ours, fmt.Sprintf("%s+%08x", k.Name(), k.KeyHash()))
	}
	if len(signers) == 0 || slices.ContainsFunc(signers, func(n string) bool { return slices.Contains(ours, n) }) {
		return why
	}
	return fmt.Sprintf("it is signed by %s, and this log by %s: a checkpoint of another log, or this log and its key were both replaced",
		strings.Join(signers, ", "), strings.Join(ours, ", "))
}

// openCheckpoints reads the stored checkpoints and the ledger's size, and
// opens every checkpoint, numbered 1, 2, … oldest first, and Options.Since.
// Only the signed text counts; the size and root columns are not trusted.
func (v *verifier) openCheckpoints(ctx context.Context) error {
	// The checkpoints before the size: a checkpoint only ever covers
	// entries already there, so a gateway appending meanwhile cannot make
	// one look larger than the ledger.
	saved, err := v.st.Checkpoints(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrVerify, err)
	}
	if v.size, err = v.st.LedgerSize(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrVerify, err)
	}
	v.rep.Entries = v.size

	bad, listed := 0, 0
	v.chain = newKeyChain(saved, v.opt.Verifier)
	for i, c := range saved {
		n := i + 1
		t, err := v.open(c.Note, v.chain.inForce(i))
		if err != nil {
			if bad++; bad <= maxListed || n == len(saved) {
				listed++
				what := fmt.Sprintf("checkpoint %d", n)
				if n == len(saved) {
					what = fmt.Sprintf("the latest stored checkpoint (checkpoint %d)", n)
				}
				v.problemf(KindCheckpoint, "%s: %v", what, err)
			}
			continue
		}
		v.cps = append(v.cps, signed{n, *t})
		if n == len(saved) {
			v.rep.Checkpoint = t
		}
	}
	if bad > listed {
		v.problemf(KindCheckpoint, "%d more stored checkpoints do not verify either", bad-listed)
	}
	if v.opt.Since != nil {
		var t *Tree
		var err error
		for _, key := range v.chain.trusted { // any key of the ledger's
			if t, err = v.open(v.opt.Since, key); err == nil {
				break
			}
		}
		if err != nil {
			v.problemf(KindCheckpoint, "the given checkpoint: %s", v.foreign(v.opt.Since, err))
		}
		v.rep.Since = t
	}
	return nil
}

// checkSizes: in the order they were stored, checkpoints never shrink (a
// smaller one after a larger one is an old checkpoint put back over a
// ledger cut short), and none is larger than the ledger.
func (v *verifier) checkSizes() {
	for i, c := range v.cps {
		if i > 0 && c.Size < v.cps[i-1].Size {
			v.problemf(KindRewritten, "checkpoint %d (size %d) is smaller than an earlier one (size %d): the log was rolled back",
				c.n, c.Size, v.covered)
		}
		v.covered = max(v.covered, c.Size)
	}
	var over []signed
	for _, c := range v.cps {
		if c.Size > v.size {
			over = append(over, c)
		}
	}
	if len(over) > 0 {
		big := slices.MaxFunc(over, func(a, b signed) int { return cmp.Compare(a.Size, b.Size) })
		more := ""
		if len(over) > 1 {
			more = fmt.Sprintf(" (and %d other checkpoints are larger than the log too)", len(over)-1)
		}
		v.problemf(KindRewritten, "checkpoint %d says %d entries, the log has %d: entries were removed%s", big.n, big.Size, v.size, more)
	}
	if s := v.rep.Since; s != nil && s.Size > v.size {
		v.problemf(KindRewritten, "the given checkpoint says %d entries, the log has %d: entries were removed", s.Size, v.size)
	}
	v.covered = min(v.covered, v.size)
}

// signedTimes are the checkpoints' signed times by size, for lateness: an
// entry at index i was not in any checkpoint of size <= i; if its event
// was received more than the lag before such a checkpoint was signed, it
// reached the database later than any genuine event does (inserted behind
// the gateway's back and back-dated). Only signed times count: the
// sequencer's stored late flag can be cleared by anyone who can write the
// database.
func (v *verifier) signedTimes() []signedAt {
	var timed []signedAt
	for _, c := range v.cps {
		if !c.Time.IsZero() {
			timed = append(timed, signedAt{c.Size, c.Time, fmt.Sprintf("checkpoint %d", c.n)})
		}
	}
	if s := v.rep.Since; s != nil && !s.Time.IsZero() {
		timed = append(timed, signedAt{s.Size, s.Time, "the given checkpoint"})
	}
	slices.SortStableFunc(timed, func(a, b signedAt) int { return cmp.Compare(a.size, b.size) })
	return timed
}

// recompute streams every entry: each leaf from its event, checked against
// the stored tree's leaf, judged for lateness and pruning; it keeps the
// tree's root at each checkpoint's size (one per distinct size).
func (v *verifier) recompute(ctx context.Context) error {
	v.timed = v.signedTimes()
	v.roots = map[int64]tlog.Hash{}
	for _, c := range v.cps {
		if c.Size <= v.size {
			v.roots[c.Size] = tlog.Hash{}
		}
	}
	if s := v.rep.Since; s != nil && s.Size <= v.size {
		v.roots[s.Size] = tlog.Hash{}
	}
	v.keepRoot()
	v.storedLeaves = true
	for next := int64(0); next < v.size; {
		recs, err := v.st.LedgerRecords(ctx, next, verifyPage)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrVerify, err)
		}
		if len(recs) == 0 {
			break
		}
		page, err := v.readLeaves(ctx, next, recs[len(recs)-1].Entry.Index)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			for ; next < rec.Entry.Index; next++ { // a deleted ledger entry
				v.add(Problem{Index: next, Kind: KindEntryChanged, Detail: "the log entry at this position is gone"})
				h, _ := page.at(next)
				v.tree.push(h)
				v.keepRoot()
			}
			v.entry(rec, next, page)
			next++
		}
	}
	v.reached = v.tree.n
	return nil
}

// keepRoot notes the tree's root when its size is a checkpoint's.
func (v *verifier) keepRoot() {
	if _, ok := v.roots[v.tree.n]; ok {
		v.roots[v.tree.n] = v.tree.root()
	}
}

// leafPage is the stored tree's leaves for entries [start, start+len).
type leafPage struct {
	start  int64
	hashes []store.Hash // nil: the stored leaves cannot be read
}

func (p leafPage) at(i int64) (tlog.Hash, bool) {
	if p.hashes == nil {
		return tlog.Hash{}, false
	}
	return p.hashes[i-p.start], true
}

// readLeaves reads the stored leaves of entries [from, last]; once they
// are found missing, it reports that once and reads no more.
func (v *verifier) readLeaves(ctx context.Context, from, last int64) (leafPage, error) {
	page := leafPage{start: from}
	if !v.storedLeaves {
		return page, nil
	}
	idx := make([]int64, 0, last-from+1)
	for i := from; i <= last; i++ {
		idx = append(idx, tlog.StoredHashIndex(0, i))
	}
	level0, err := v.st.ReadHashes(ctx, idx)
	switch {
	case errors.Is(err, anyhook.ErrNotFound):
		v.storedLeaves = false
		v.problemf(KindEntryChanged, "stored tree hashes are missing (%v)", err)
	case err != nil:
		return page, fmt.Errorf("%w: %w", ErrVerify, err)
	default:
		page.hashes = level0
	}
	return page, nil
}

// entry checks the entry at index next: its leaf against its event and the
// stored tree, its receive time against the signed times, its pruning
// against retention; then adds its leaf to the tree.
func (v *verifier) entry(rec store.LedgerRecord, next int64, page leafPage) {
	if next >= v.covered && v.uncoveredSince.IsZero() {
		v.uncoveredSince = rec.Entry.SequencedAt
	}
	leaf, p := checkRecord(rec)
	if p != nil {
		v.add(*p)
	}
	if h, ok := page.at(next); ok && p == nil && h != leaf.Hash {
		v.add(Problem{EventID: rec.Entry.EventID, Index: next, Kind: KindEntryChanged,
			Detail: "the tree's leaf at this position is not this event's"})
	}
	for ; v.nextTimed < len(v.timed) && v.timed[v.nextTimed].size <= next; v.nextTimed++ {
		if v.timed[v.nextTimed].at.After(v.judge.at) {
			v.judge = v.timed[v.nextTimed]
		}
	}
	switch {
	case p != nil:
		// Changed already; its stored receive time proves nothing.
	case !v.judge.at.IsZero():
		if got := rec.Event.ReceivedAt; got.Before(v.judge.at.Add(-v.opt.Lag)) {
			v.add(Problem{EventID: rec.Entry.EventID, Index: next, Kind: KindInserted,
				Detail: fmt.Sprintf("received %s, more than %s before %s was signed (%s), which did not hold it: it was put into the database later",
					got.UTC().Format(time.RFC3339), span(v.opt.Lag), v.judge.what, v.judge.at.Format(time.RFC3339))})
		}
	case rec.Entry.Late:
		// No signed time to judge by (checkpoints from before they
		// carried one): the sequencer's flag is all there is.
		v.add(Problem{EventID: rec.Entry.EventID, Index: next, Kind: KindInserted,
			Detail: "it appeared in the database long after a checkpoint that should have held it (flagged by the sequencer)"})
	}
	if rec.Entry.BodyPruned {
		v.rep.Pruned++
		if p == nil {
			if d := prunedEarly(rec.Event.ReceivedAt, v.now, v.opt); d != "" {
				v.add(Problem{EventID: rec.Entry.EventID, Index: next, Kind: KindPrunedEarly, Detail: d})
			}
		}
	}
	v.tree.push(leaf.Hash)
	v.keepRoot()
}

// checkRoots: every checkpoint's root is the events' root at its size (one
// rewritten event puts every later checkpoint out: name the first); the
// stored tree gives the latest checkpoint's root; and the ledger extends
// Options.Since, with the consistency proof a witness would ask for.
func (v *verifier) checkRoots(ctx context.Context) {
	var wrong []signed
	for _, c := range v.cps {
		if c.Size <= v.reached && v.roots[c.Size] != c.Root {
			wrong = append(wrong, c)
		}
	}
	if len(wrong) > 0 {
		c, more := wrong[0], ""
		if len(wrong) > 1 {
			more = fmt.Sprintf(" (and %d later checkpoints disagree too)", len(wrong)-1)
		}
		v.problemf(KindRewritten, "the events give root %s at size %d, the signed checkpoint %d says %s%s",
			b64(v.roots[c.Size]), c.Size, c.n, b64(c.Root), more)
	}
	r := HashReader(ctx, v.st)
	if t := v.rep.Checkpoint; t != nil && t.Size <= v.size {
		if th, err := tlog.TreeHash(t.Size, r); err != nil || th != t.Root {
			v.problemf(KindRewritten, "the stored tree does not match the signed checkpoint at size %d", t.Size)
		}
	}
	s := v.rep.Since
	if s == nil || s.Size > v.size {
		return
	}
	if got := v.roots[s.Size]; s.Size <= v.reached && got != s.Root {
		v.problemf(KindRewritten, "the log is not an extension of the given checkpoint: the events give root %s at size %d, the checkpoint says %s",
			b64(got), s.Size, b64(s.Root))
	}
	// From the given checkpoint to the latest signed one (or to the
	// stored tree).
	n, root := v.size, tlog.Hash{}
	if t := v.rep.Checkpoint; t != nil && t.Size >= s.Size {
		n, root = t.Size, t.Root
	} else if h, err := tlog.TreeHash(v.size, r); err != nil {
		v.problemf(KindRewritten, "tree hash: %v", err)
	} else {
		root = h
	}
	if proof, err := tlog.ProveTree(n, s.Size, r); err != nil {
		v.problemf(KindRewritten, "no consistency proof from size %d to %d: %v", s.Size, n, err)
	} else if err := tlog.CheckTree(proof, n, root, s.Size, s.Root); err != nil {
		v.problemf(KindRewritten, "the log at size %d does not prove consistent with the given checkpoint at size %d: %v", n, s.Size, err)
	}
}

// checkCoverage: entries no checkpoint holds, sequenced long ago, mean the
// checkpoints that held them were deleted (or none was ever signed).
func (v *verifier) checkCoverage() {
	if v.covered < v.size && !v.uncoveredSince.IsZero() && v.now.Sub(v.uncoveredSince) > v.opt.CheckpointGrace {
		v.problemf(KindMissingCheckpoint, "entries %d.. are in no signed checkpoint although sequenced over %s ago: checkpoints were deleted or the checkpointer is not running",
			v.covered, span(v.opt.CheckpointGrace))
	}
}

// checkPruned: bodies pruned although a delivery still needs them
// (retention never prunes those: sqlstore.NeedsBody).
func (v *verifier) checkPruned(ctx context.Context) error {
	needed, err := v.st.PrunedStillNeeded(ctx, 10000)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrVerify, err)
	}
	for _, e := range needed {
		v.add(Problem{EventID: e.EventID, Index: e.Index, Kind: KindPrunedEarly,
			Detail: "its body was emptied although a delivery still needs it (pending, delivering, paused, held, or dead and not discarded): retention never prunes such a body"})
	}
	return nil
}

// checkUnsequenced: events that never made it into the ledger, and how
// many are still waiting for a position.
func (v *verifier) checkUnsequenced(ctx context.Context) error {
	old, err := v.st.Unsequenced(ctx, v.now.Add(-v.opt.Lag), 10000)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrVerify, err)
	}
	for _, ev := range old {
		v.add(Problem{EventID: ev.ID, Index: -1, Kind: KindInserted,
			Detail: fmt.Sprintf("received %s but not in the log", ev.ReceivedAt.Format(time.RFC3339))})
	}
	all, err := v.st.Unsequenced(ctx, v.now.Add(24*time.Hour), 10000)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrVerify, err)
	}
	v.rep.Waiting = max(0, len(all)-len(old))
	return nil
}

// prunedEarly says why retention cannot have pruned the body of an event
// received at received, or "" when it can have.
func prunedEarly(received, now time.Time, opt VerifyOptions) string {
	switch {
	case opt.Retention == RetainForever:
		return "its body was emptied, but log.retention is 0s (bodies are kept): retention never prunes"
	case opt.Retention <= 0:
		return ""
	}
	if age := now.Sub(received); age < opt.Retention-opt.Lag {
		return fmt.Sprintf("its body was emptied, but it was received %s (%s ago), less than log.retention (%s) ago: retention cannot have pruned it yet",
			received.UTC().Format(time.RFC3339), age.Round(time.Second), span(opt.Retention))
	}
	return ""
}

// keyChain is which key must have signed each stored checkpoint. Without
// key rotations, the trusted key signs them all. Rotation checkpoints
// (anyhook log rotate-key), each signed by both the keys its "rotate" line
// names, form one chain in stored order, every handover starting from the
// key the previous one handed to; the chain must hold a handover the
// trusted key itself signed (the verifier's own object, never a key merely
// named alike), and only that chain counts: checkpoints up to and
// including a handover must be signed by its old key, those after it by
// its new one (until the next). A handover off the chain — say one from a
// retired key, whose thief signs it with a key of their own — hands
// nothing over: it is an ordinary checkpoint, checked against the key in
// force at its position.
type keyChain struct {
	trusted []note.Verifier
	bridges []keyBridge // the chain, in stored order
	pinned  note.Verifier
}

type keyBridge struct {
	pos      int // in the stored order, from 0
	rot      Rotation
	from, to note.Verifier
}

func newKeyChain(saved []store.Checkpoint, pinned note.Verifier) *keyChain {
	c := &keyChain{trusted: []note.Verifier{pinned}, pinned: pinned}
	if pinned == nil {
		return c
	}
	// The candidates: rotation checkpoints signed by both keys they name.
	var cands []keyBridge
	anchor := -1 // the first candidate the trusted key signed
	for i, cp := range saved {
		t, err := ParseCheckpointText(noteText(cp.Note)) // its signatures are checked below
		if err != nil || t.Rotation == nil {
			continue
		}
		from, errFrom := note.NewVerifier(t.Rotation.From)
		to, errTo := note.NewVerifier(t.Rotation.To)
		if errFrom != nil || errTo != nil || !signedRotation(cp.Note, from, *t.Rotation) || !signedRotation(cp.Note, to, *t.Rotation) {
			continue
		}
		if anchor < 0 && signedRotation(cp.Note, pinned, *t.Rotation) {
			anchor = len(cands)
		}
		cands = append(cands, keyBridge{i, *t.Rotation, from, to})
	}
	if anchor < 0 {
		return c
	}
	// From the anchor, back to the first key and on to the last: each
	// link hands over from the key the previous one handed to.
	chain := []keyBridge{cands[anchor]}
	for j, cur := anchor-1, cands[anchor].rot.From; j >= 0; j-- {
		if cands[j].rot.To == cur {
			chain = append([]keyBridge{cands[j]}, chain...)
			cur = cands[j].rot.From
		}
	}
	for j, cur := anchor+1, cands[anchor].rot.To; j < len(cands); j++ {
		if cands[j].rot.From == cur {
			chain = append(chain, cands[j])
			cur = cands[j].rot.To
		}
	}
	c.bridges = chain
	added := map[string]bool{}
	for _, b := range chain {
		for vkey, v := range map[string]note.Verifier{b.rot.From: b.from, b.rot.To: b.to} {
			if !added[vkey] {
				added[vkey] = true
				c.trusted = append(c.trusted, v)
			}
		}
	}
	return c
}

// signedRotation reports whether v signed msg, a handover rot.
func signedRotation(msg []byte, v note.Verifier, rot Rotation) bool {
	t, err := OpenCheckpoint(msg, v)
	return err == nil && t.Rotation != nil && *t.Rotation == rot
}

// inForce is the key that must have signed stored checkpoint i (from 0).
func (c *keyChain) inForce(i int) note.Verifier {
	for _, b := range c.bridges {
		if i <= b.pos {
			return b.from
		}
	}
	if n := len(c.bridges); n > 0 {
		return c.bridges[n-1].to
	}
	return c.pinned
}

// checkRecord recomputes rec's leaf from its event and compares it with
// the entry.
func checkRecord(rec store.LedgerRecord) (Leaf, *Problem) {
	e := rec.Entry
	if rec.Event == nil {
		return Leaf{Hash: e.LeafHash}, &Problem{EventID: e.EventID, Index: e.Index, Kind: KindDeleted, Detail: "the event row is gone"}
	}
	var leaf Leaf
	if e.BodyPruned && len(rec.Event.Body) == 0 {
		leaf = LeafWithBodyHash(rec.Event, e.BodyHash)
	} else {
		leaf = LeafOf(rec.Event)
	}
	p := &Problem{EventID: e.EventID, Index: e.Index}
	switch {
	case leaf.Hash == e.LeafHash:
		return leaf, nil
	case leaf.BodyHash != e.BodyHash:
		p.Kind, p.Detail = KindBodyChanged, "its SHA-256 is not the one logged"
	case leaf.HeaderHash != e.HeaderHash:
		p.Kind, p.Detail = KindHeadersChanged, "their SHA-256 is not the one logged"
	default:
		p.Kind, p.Detail = KindFieldsChanged, "the leaf recomputed from the row is not the one logged"
	}
	return leaf, p
}

// span writes d for a sentence: "30 days", "an hour", "2 hours", "90
// minutes", "45s".
func span(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "an hour"
	case d == 24*time.Hour:
		return "a day"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%d hours", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return d.String()
}

func b64(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

// rootStack computes an RFC 6962 tree root over leaves pushed in order,
// keeping one hash per complete subtree.
type rootStack struct {
	n      int64
	hashes []tlog.Hash
	sizes  []int64
}

func (s *rootStack) push(h tlog.Hash) {
	s.n++
	s.hashes = append(s.hashes, h)
	s.sizes = append(s.sizes, 1)
	for k := len(s.sizes); k >= 2 && s.sizes[k-1] == s.sizes[k-2]; k = len(s.sizes) {
		s.hashes[k-2] = tlog.NodeHash(s.hashes[k-2], s.hashes[k-1])
		s.sizes[k-2] *= 2
		s.hashes, s.sizes = s.hashes[:k-1], s.sizes[:k-1]
	}
}

func (s *rootStack) root() tlog.Hash {
	if len(s.hashes) == 0 {
		return sha256.Sum256(nil) // RFC 6962: the hash of the empty string
	}
	h := s.hashes[len(s.hashes)-1]
	for i := len(s.hashes) - 2; i >= 0; i-- {
		h = tlog.NodeHash(s.hashes[i], h)
	}
	return h
}
