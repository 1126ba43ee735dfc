package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
)

const logUsage = "usage: anyhook log verify [--config FILE] [--checkpoint FILE] [--key VERIFIER_KEY] [--lag D] [--retention D] | anyhook log key [--config FILE] | anyhook log rotate-key [--config FILE] --new-key-file FILE"

// logCommand runs "anyhook log verify" and "anyhook log key".
func logCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "verify":
			return logVerify(ctx, args[1:], stdout, stderr)
		case "key":
			return logKey(args[1:], stdout, stderr)
		case "rotate-key":
			return logRotateKey(ctx, args[1:], stdout, stderr)
		}
	}
	return fail(stderr, exitUsage, errors.New(logUsage))
}

// logKey prints the log's public key (the note verifier key), creating the
// signing key when it does not exist yet, so that it can be pinned before
// the first start.
func logKey(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("log key", stderr)
	cfgPath := fs.String("config", "", "config file (default $ANYHOOK_CONFIG, else ./anyhook.yaml)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	key, err := ledger.LoadOrCreateKey(cfg.LogKeyPath(), cfg.Log.Origin)
	if err != nil {
		return fail(stderr, exitUsage, cfg.Errorf("log.key_file", "%v", err))
	}
	fmt.Fprintln(stdout, key.VerifierKey)
	return exitOK
}

// logVerify recomputes the tamper-evident log (SPEC §2, §8): exit 0 with a
// one-line summary when intact, exit 1 naming each event that does not
// match, exit 2 when it cannot run.
func logVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("log verify", stderr)
	cfgPath := fs.String("config", "", "config file (default $ANYHOOK_CONFIG, else ./anyhook.yaml)")
	cpPath := fs.String("checkpoint", "", "a signed checkpoint kept earlier (by a witness or push_url): also prove the log only grew since")
	vkey := fs.String("key", "", "the log's public key as pinned (anyhook log key); default: derived from log.key_file")
	lag := fs.Duration("lag", ledger.DefaultLag, "an event older than this without a log position counts as inserted")
	retention := fs.Duration("retention", -1, "bodies of events younger than this must not be pruned (default log.retention; pass the old value for a while after lengthening it)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	var v note.Verifier
	if *vkey != "" {
		if v, err = note.NewVerifier(*vkey); err != nil {
			return fail(stderr, exitUsage, fmt.Errorf("log verify: --key: not a note verifier key: %v", err))
		}
	} else {
		key, err := ledger.LoadKey(cfg.LogKeyPath())
		if err != nil {
			return fail(stderr, exitUsage, cfg.Errorf("log.key_file", "%v (or pass the pinned public key with --key)", err))
		}
		v = key.Verifier
	}
	origin := cfg.Log.Origin
	if origin == "" {
		origin = v.Name()
	}
	var since []byte
	if *cpPath != "" {
		if since, err = os.ReadFile(*cpPath); err != nil {
			return fail(stderr, exitUsage, fmt.Errorf("log verify: --checkpoint: %w", err))
		}
	}
	st, err := gateway.Open(ctx, cfg)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	defer st.Close()
	l, ok := st.(store.Ledger)
	if !ok {
		return fail(stderr, exitUsage, fmt.Errorf("log verify: database %s keeps no log", cfg.Database))
	}
	// Entries outside every checkpoint for longer than this are reported:
	// an hour, or two checkpoint intervals when those are longer.
	grace := max(ledger.DefaultCheckpointGrace, 2*cfg.Log.CheckpointInterval.D())
	ret := *retention
	if ret < 0 {
		ret = cfg.Log.Retention.D()
	}
	if ret == 0 { // log.retention: 0s keeps every body
		ret = ledger.RetainForever
	}
	rep, err := ledger.Verify(ctx, l, ledger.VerifyOptions{Verifier: v, Origin: origin, Since: since, Lag: *lag, CheckpointGrace: grace,
		Retention: ret, Now: time.Now})
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	if !rep.OK() {
		for _, p := range rep.Problems {
			fmt.Fprintln(stdout, p)
		}
		return fail(stderr, exitFail, fmt.Errorf("log verify: %d problem(s) in a log of %d events", len(rep.Problems), rep.Entries))
	}
	fmt.Fprintln(stdout, rep.Summary())
	return exitOK
}

// logRotateKey hands the log from the key in log.key_file to a new one
// (docs/ledger.md, "The log's key"): a checkpoint of the whole log signed by
// both keys, and the new key recorded in the database as the log's key.
// Every gateway must be stopped first and restarted with the new key file.
func logRotateKey(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("log rotate-key", stderr)
	cfgPath := fs.String("config", "", "config file (default $ANYHOOK_CONFIG, else ./anyhook.yaml)")
	newPath := fs.String("new-key-file", "", "the new signing key; created (mode 0600, named like the current key) when missing")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *newPath == "" {
		return fail(stderr, exitUsage, errors.New("log rotate-key: --new-key-file is required"))
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	old, err := ledger.LoadKey(cfg.LogKeyPath())
	if err != nil {
		return fail(stderr, exitUsage, cfg.Errorf("log.key_file", "%v", err))
	}
	next, err := ledger.LoadOrCreateKey(*newPath, old.Name())
	if err != nil {
		return fail(stderr, exitUsage, fmt.Errorf("log rotate-key: --new-key-file: %w", err))
	}
	if cfg.Log.Origin == "" && next.Name() != old.Name() {
		return fail(stderr, exitUsage, fmt.Errorf("log rotate-key: --new-key-file: the key is named %q, but the log is named after the current key, %q: name the new key the same, or set log.origin", next.Name(), old.Name()))
	}
	st, err := gateway.Open(ctx, cfg)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	defer st.Close()
	l, ok := st.(store.Ledger)
	if !ok {
		return fail(stderr, exitUsage, fmt.Errorf("log rotate-key: database %s keeps no log", cfg.Database))
	}
	cp, err := ledger.Rotate(ctx, l, old, next, ledger.RotateOptions{Origin: cfg.Log.Origin})
	var km *ledger.KeyMismatchError
	switch {
	case errors.As(err, &km):
		return fail(stderr, exitUsage, cfg.Errorf("log.key_file", "%s: %s", cfg.LogKeyPath(), km.Reason))
	case errors.Is(err, anyhook.ErrInvalid):
		return fail(stderr, exitUsage, fmt.Errorf("log rotate-key: %w", err))
	case err != nil:
		return fail(stderr, exitFail, fmt.Errorf("log rotate-key: %w", err))
	}
	fmt.Fprintf(stdout, "log key rotated at size %d: %s signed the handover with %s; the log's key is now\n%s\nPoint log.key_file at %s on every gateway before starting it, and have users and witnesses pin the new key.\n",
		cp.Size, ledger.KeyID(old.VerifierKey), ledger.KeyID(next.VerifierKey), next.VerifierKey, *newPath)
	return exitOK
}
