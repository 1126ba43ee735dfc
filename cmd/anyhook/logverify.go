package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/ledger"
)

const logUsage = `usage: anyhook log <command> [flags]

commands:
  verify      recompute the tamper-evident log (anyhook log verify --help)
  key         print the log's public key (anyhook log key --help)
  rotate-key  hand the log over to a new key (anyhook log rotate-key --help)`

// logCommand runs "anyhook log verify", "anyhook log key" and "anyhook log
// rotate-key".
func logCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return fail(stderr, exitUsage, errors.New("log: give a command: log verify, log key or log rotate-key (anyhook log --help)"))
	}
	switch args[0] {
	case "verify":
		return logVerify(ctx, args[1:], stdout, stderr)
	case "key":
		return logKey(args[1:], stdout, stderr)
	case "rotate-key":
		return logRotateKey(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, logUsage)
		return exitOK
	}
	msg := fmt.Sprintf("log: unknown command %q", args[0])
	if s := cli.Suggest(args[0], []string{"verify", "key", "rotate-key"}); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return fail(stderr, exitUsage, errors.New(msg+"; the commands are log verify, log key and log rotate-key"))
}

const logKeyUsage = `usage: anyhook log key [--config FILE]

Prints the log's public key (a note verifier key) for users and witnesses
to pin, creating the signing key log.key_file when it does not exist yet.`

const logVerifyUsage = `usage: anyhook log verify [--config FILE] [--checkpoint FILE] [--key KEY] [--lag D] [--retention D] [--json]

Recomputes the tamper-evident log from the database. Exit 0 when it is
intact; exit 1 naming each event that does not match (by AnyHook event id);
exit 2 when it cannot run. With --checkpoint, also proves the log only grew
since that checkpoint. It changes nothing: a store whose schema is older than
this binary is refused (exit 2), not upgraded (check a store with the build
that serves it), and a database with no store is not given one.`

const logRotateKeyUsage = `usage: anyhook log rotate-key [--config FILE] --new-key-file FILE

Hands the log over from the key in log.key_file to a new one: a checkpoint
of the whole log signed by both keys, and the new key recorded in the
database as the log's key. Stop every gateway first; restart them with
log.key_file pointing at the new key (docs/ledger.md).`

// logKey prints the ledger's public key (the note verifier key), creating the
// signing key when it does not exist yet, so that it can be pinned before
// the first start.
func logKey(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("log key")
	cfgPath := configFlag(fs)
	if code := parse(fs, args, stdout, stderr, logKeyUsage); code >= 0 {
		return code
	}
	cfg, err := loadConfig(*cfgPath, stderr, "log key", "log")
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	key, err := ledger.LoadOrCreateKey(cfg.LedgerKeyPath(), cfg.Ledger.Origin)
	if err != nil {
		return fail(stderr, exitUsage, cfg.Errorf("log.key_file", "%v", err))
	}
	fmt.Fprintln(stdout, key.VerifierKey)
	return exitOK
}

// logVerify recomputes the tamper-evident ledger (SPEC §2, §8): exit 0 with a
// one-line summary when intact, exit 1 naming each event that does not
// match, exit 2 when it cannot run.
func logVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("log verify")
	cfgPath := configFlag(fs)
	cpPath := fs.String("checkpoint", "", "a signed checkpoint `file` kept earlier (by a witness or push_url, or GET /api/log/checkpoint's answer): also prove the log only grew since")
	vkey := fs.String("key", "", "the log's public `key` as pinned (anyhook log key); default: derived from log.key_file")
	lag := fs.Duration("lag", ledger.DefaultLag, "an event older than this `duration` without a log position counts as inserted")
	retention := fs.Duration("retention", -1, "bodies of events younger than this `duration` must not be pruned (default log.retention; pass the old value for a while after lengthening it)")
	asJSON := fs.Bool("json", false, "print the report as JSON (see docs/ledger.md)")
	if code := parse(fs, args, stdout, stderr, logVerifyUsage); code >= 0 {
		return code
	}
	cfg, err := loadConfig(*cfgPath, stderr, "log verify", "database", "log")
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	var v note.Verifier
	if *vkey != "" {
		if v, err = note.NewVerifier(*vkey); err != nil {
			return fail(stderr, exitUsage, fmt.Errorf("log verify: --key: not a note verifier key: %v", err))
		}
	} else {
		key, err := loadLogKey(cfg, "; or pass the log's pinned public key with --key")
		if err != nil {
			return fail(stderr, exitUsage, err)
		}
		v = key.Verifier
	}
	origin := cfg.Ledger.Origin
	if origin == "" {
		origin = v.Name()
	}
	var since []byte
	if *cpPath != "" {
		if since, err = os.ReadFile(*cpPath); err != nil {
			return fail(stderr, exitUsage, fmt.Errorf("log verify: --checkpoint: %w", err))
		}
		if since, err = ledger.SignedCheckpoint(since); err != nil {
			return fail(stderr, exitUsage, fmt.Errorf("log verify: --checkpoint %s: %w", *cpPath, err))
		}
	}
	st, err := openStore(ctx, cfg, "log verify", noUpgrade, stderr)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	defer st.Close()
	// Entries outside every checkpoint for longer than this are reported:
	// an hour, or two checkpoint intervals when those are longer.
	grace := max(ledger.DefaultCheckpointGrace, 2*cfg.Ledger.CheckpointInterval.D())
	ret := *retention
	if ret < 0 {
		ret = cfg.Ledger.Retention.D()
	}
	if ret == 0 { // log.retention: 0s keeps every body
		ret = ledger.RetainForever
	}
	rep, err := ledger.Verify(ctx, st, ledger.VerifyOptions{Verifier: v, Origin: origin, Since: since, Lag: *lag, CheckpointGrace: grace,
		Retention: ret, Now: time.Now})
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	switch {
	case *asJSON:
		b, _ := json.Marshal(verifyJSON(rep))
		fmt.Fprintf(stdout, "%s\n", b)
	case !rep.OK():
		for _, p := range rep.Problems {
			fmt.Fprintln(stdout, p)
		}
	default:
		fmt.Fprintln(stdout, rep.Summary())
	}
	if !rep.OK() {
		return fail(stderr, exitFail, fmt.Errorf("log verify: %d problem(s) in a log of %d events", len(rep.Problems), rep.Entries))
	}
	return exitOK
}

// logRotateKey hands the log from the key in log.key_file to a new one
// (docs/ledger.md, "The log's key"): a checkpoint of the whole ledger signed by
// both keys, and the new key recorded in the database as the ledger's key.
// Every gateway must be stopped first and restarted with the new key file.
func logRotateKey(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("log rotate-key")
	cfgPath := configFlag(fs)
	newPath := fs.String("new-key-file", "", "the new signing key `file`; created (mode 0600, named like the current key) when missing")
	if code := parse(fs, args, stdout, stderr, logRotateKeyUsage); code >= 0 {
		return code
	}
	if *newPath == "" {
		return fail(stderr, exitUsage, errors.New("log rotate-key: --new-key-file is required"))
	}
	cfg, err := loadConfig(*cfgPath, stderr, "log rotate-key", "database", "log")
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	old, err := loadLogKey(cfg, "")
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	next, err := ledger.LoadOrCreateKey(*newPath, old.Name())
	if err != nil {
		return fail(stderr, exitUsage, fmt.Errorf("log rotate-key: --new-key-file: %w", err))
	}
	if cfg.Ledger.Origin == "" && next.Name() != old.Name() {
		return fail(stderr, exitUsage, fmt.Errorf("log rotate-key: --new-key-file: the key is named %q, but the log is named after the current key, %q: name the new key the same, or set log.origin", next.Name(), old.Name()))
	}
	st, err := openStore(ctx, cfg, "log rotate-key", mayUpgrade, stderr)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	defer st.Close()
	cp, err := ledger.Rotate(ctx, st, old, next, ledger.RotateOptions{Origin: cfg.Ledger.Origin})
	var km *ledger.KeyMismatchError
	switch {
	case errors.As(err, &km):
		return fail(stderr, exitUsage, cfg.Errorf("log.key_file", "%s: %s", cfg.LedgerKeyPath(), km.Reason))
	case errors.Is(err, anyhook.ErrInvalid):
		return fail(stderr, exitUsage, fmt.Errorf("log rotate-key: %w", err))
	case err != nil:
		return fail(stderr, exitFail, fmt.Errorf("log rotate-key: %w", err))
	}
	fmt.Fprintf(stdout, "log key rotated at size %d: %s signed the handover with %s; the log's key is now\n%s\nPoint log.key_file at %s on every gateway before starting it, and have users and witnesses pin the new key.\n",
		cp.Size, ledger.KeyID(old.VerifierKey), ledger.KeyID(next.VerifierKey), next.VerifierKey, *newPath)
	return exitOK
}

// loadLogKey reads the config's log signing key. A missing file says so
// plainly, and what to do: after a restore from a backup it is the key
// file that was not restored (a log verifies only with its own key), and
// making a new one would not help. or is a further way out, or "".
func loadLogKey(cfg *config.Config, or string) (*ledger.Key, error) {
	key, err := ledger.LoadKey(cfg.LedgerKeyPath())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, cfg.Errorf("log.key_file", "the log's key file %s is missing: after restoring a database from a backup, restore the key file kept with it (docs/reliability.md, \"Backup and restore\"); the log verifies only with its own key%s", cfg.LedgerKeyPath(), or)
	case err != nil:
		return nil, cfg.Errorf("log.key_file", "%v", err)
	}
	return key, nil
}

// verifyReport is what log verify --json prints.
type verifyReport struct {
	OK         bool          `json:"ok"`
	Entries    int64         `json:"entries"`              // log size
	Checkpoint *treeJSON     `json:"checkpoint,omitempty"` // the latest signed checkpoint, when it verified
	Since      *treeJSON     `json:"since,omitempty"`      // --checkpoint, when the ledger is consistent with it
	Pruned     int64         `json:"pruned"`               // entries whose body was pruned (hashes kept)
	Waiting    int           `json:"waiting"`              // events not yet in the ledger, younger than --lag
	Problems   []problemJSON `json:"problems"`
	Summary    string        `json:"summary,omitempty"` // the line printed without --json, when intact
}

type treeJSON struct {
	Size int64  `json:"size"`
	Root string `json:"root"` // base64
}

type problemJSON struct {
	EventID string `json:"event_id,omitempty"` // the AnyHook event id
	Index   *int64 `json:"index,omitempty"`    // ledger position, when it has one
	Kind    string `json:"kind"`
	Detail  string `json:"detail,omitempty"`
	Text    string `json:"text"` // the line printed without --json
}

func verifyJSON(rep *ledger.Report) verifyReport {
	tree := func(t *ledger.Tree) *treeJSON {
		if t == nil {
			return nil
		}
		return &treeJSON{Size: t.Size, Root: base64.StdEncoding.EncodeToString(t.Root[:])}
	}
	out := verifyReport{OK: rep.OK(), Entries: rep.Entries, Checkpoint: tree(rep.Checkpoint), Since: tree(rep.Since),
		Pruned: rep.Pruned, Waiting: rep.Waiting, Problems: []problemJSON{}}
	if rep.OK() {
		out.Summary = rep.Summary()
	}
	for _, p := range rep.Problems {
		pj := problemJSON{EventID: p.EventID, Kind: p.Kind, Detail: p.Detail, Text: p.String()}
		if p.Index >= 0 {
			pj.Index = &p.Index
		}
		out.Problems = append(out.Problems, pj)
	}
	return out
}
