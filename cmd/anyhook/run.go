package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/bench"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/send"
	"github.com/anyhook/anyhook/internal/soak"
	"github.com/anyhook/anyhook/internal/store"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a problem (log verify)
	exitUsage = 2 // bad flags, bad config, unreachable database
)

const usage = `usage: anyhook <command> [flags]

commands:
  serve    run the gateway (ingest, delivery, admin API)
  send     sign and send an event as a provider would
  replay   mark events for redelivery
  sink     a destination to try it with: prints each delivery it receives
  log      verify the tamper-evident log (log verify), print its public key (log key)
  bench    measure ingest and delivery on this machine
  soak     run gateways under load with injected faults and reconcile
  backup   copy a live SQLite store consistently (VACUUM INTO)
  version  print version and build info

Run 'anyhook <command> -h' for a command's flags.
`

// run is the whole program, testable: args without the program name.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, rest, stdout, stderr)
	case "send":
		return send.Main(ctx, rest, stdout, stderr)
	case "sink":
		return sink(ctx, rest, stdout, stderr)
	case "replay":
		return replay(ctx, rest, stdout, stderr)
	case "bench":
		return bench.Main(ctx, rest, stdout, stderr)
	case "soak":
		return soak.Main(ctx, rest, stdout, stderr)
	case "backup":
		return backup(ctx, rest, stdout, stderr)
	case "log":
		return logCmd(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "anyhook: unknown command %q\n%s", cmd, usage)
		return exitUsage
	}
}

func versionString() string {
	s := "anyhook " + gateway.Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		s += " (" + bi.GoVersion
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" {
				s += ", " + kv.Value
			}
		}
		s += ")"
	}
	return s
}

// fail prints a one-line error and returns the exit status for it.
func fail(stderr io.Writer, code int, err error) int {
	fmt.Fprintf(stderr, "anyhook: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	return code
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("anyhook "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses flags; it returns -1 to go on, or the exit status.
func parse(fs *flag.FlagSet, args []string) int {
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		return exitUsage
	case fs.NArg() > 0:
		fmt.Fprintf(fs.Output(), "anyhook: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	return -1
}

func loadConfig(path string) (*config.Config, error) {
	return config.Load(config.Resolve(path))
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", stderr)
	cfgPath := fs.String("config", "", "config file (default $ANYHOOK_CONFIG, else ./anyhook.yaml)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	log, err := newLogger(stderr, *level)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	g, err := gateway.New(ctx, gateway.Options{Config: cfg, Logger: log})
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		g.Stop(context.Background())
		return fail(stderr, exitUsage, fmt.Errorf("%s: listen: %w", cfg.Path, err))
	}
	g.Start(ctx, ln)
	fmt.Fprintf(stdout, "anyhook %s listening on http://%s\n", gateway.Version, ln.Addr())
	code := exitOK // SIGINT/SIGTERM: a graceful stop exits 0 (SPEC §2)
	select {
	case <-ctx.Done():
	case err := <-g.Err():
		log.Error("server failed", "err", err)
		code = exitFail // so that a supervisor restarts it
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second+cfg.Delivery.Shutdown.D())
	defer cancel()
	if err := g.Stop(stopCtx); err != nil {
		// What did not finish stays claimed and is rescued by lease.
		log.Warn("stop was not clean", "err", err)
	}
	return code
}

func replay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("replay", stderr)
	cfgPath := fs.String("config", "", "config file (default $ANYHOOK_CONFIG, else ./anyhook.yaml)")
	eventID := fs.String("event", "", "replay this event to every destination of its source")
	status := fs.String("status", "", "replay deliveries in this status (e.g. dead)")
	source := fs.String("source", "", "with --status: only this source")
	dest := fs.String("destination", "", "only this destination")
	since := fs.String("since", "", "with --status: deliveries created at or after this RFC 3339 time or this long ago (e.g. 24h)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if (*eventID == "") == (*status == "") {
		return fail(stderr, exitUsage, errors.New("replay: give either --event ID or --status STATUS [--source S] [--since T]"))
	}
	var f store.DeliveryFilter
	if *status != "" {
		f = store.DeliveryFilter{Status: anyhook.DeliveryStatus(*status), Source: *source, Destination: *dest}
		if !f.Status.Valid() {
			return fail(stderr, exitUsage, fmt.Errorf("replay: --status %q is not a delivery status", *status))
		}
		if *since != "" {
			t, err := parseSince(*since, time.Now())
			if err != nil {
				return fail(stderr, exitUsage, fmt.Errorf("replay: --since: %w", err))
			}
			f.Since = t
		}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	if *dest != "" && cfg.Destinations[*dest] == nil {
		// No dispatcher would ever take such a delivery.
		return fail(stderr, exitUsage, fmt.Errorf("replay: --destination %q is not in %s (known: %s)", *dest, cfg.Path, strings.Join(cfg.DestinationOrder, ", ")))
	}
	st, err := gateway.Open(ctx, cfg)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	defer st.Close()
	if *eventID != "" {
		ev, err := st.Event(ctx, *eventID)
		if err != nil {
			return fail(stderr, exitFail, err)
		}
		var dests []string
		if src := cfg.Sources[ev.Source]; src != nil {
			dests = src.Destinations
		}
		if *dest != "" {
			dests = []string{*dest}
		}
		if cfg.Sources[ev.Source] == nil && *dest == "" {
			return fail(stderr, exitFail, fmt.Errorf("event %s is from source %q, which is no longer configured; name a --destination", ev.ID, ev.Source))
		}
		ds, err := st.Replay(ctx, ev.ID, dests)
		if err != nil {
			return fail(stderr, exitFail, err)
		}
		fmt.Fprintf(stdout, "replaying event %s: %d deliveries\n", ev.ID, len(ds))
		return exitOK
	}
	n, err := st.ReplayDeliveries(ctx, f)
	if err != nil {
		return fail(stderr, exitFail, err)
	}
	fmt.Fprintf(stdout, "replaying %d deliveries\n", n)
	return exitOK
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration", s)
	}
	return t, nil
}

func logCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return logCommand(ctx, args, stdout, stderr) // logverify.go
}
