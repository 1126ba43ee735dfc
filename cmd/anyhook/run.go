package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/buildinfo"
	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/procs"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
	"github.com/anyhook/anyhook/internal/tools/bench"
	"github.com/anyhook/anyhook/internal/tools/send"
	"github.com/anyhook/anyhook/internal/tools/soak"
	"github.com/anyhook/anyhook/internal/tracing"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a problem (log verify)
	exitUsage = 2 // bad flags, bad config, unreachable database
)

// commands are the top-level commands, in the order help lists them.
var commands = []struct{ name, does string }{
	{"serve", "run the gateway (ingest, delivery, admin API, dashboard)"},
	{"send", "sign and send an event as a provider would"},
	{"replay", "mark events for redelivery"},
	{"backfill", "after an outage, fetch from the provider's API the events it could not deliver"},
	{"sink", "a destination to try it with: prints each delivery it receives"},
	{"listen", "forward a pull destination's deliveries to a local handler"},
	{"log", "verify the tamper-evident log (log verify), print its public key (log key), change it (log rotate-key)"},
	{"bench", "measure ingest and delivery on this machine"},
	{"soak", "run gateways under load with injected faults and reconcile"},
	{"backup", "copy a live SQLite store consistently (VACUUM INTO)"},
	{"config", "validate a config and print it with defaults (config check); a provider's source block (config example)"},
	{"healthcheck", "ask a running gateway's /healthz (for container health checks)"},
	{"completion", "print a bash or zsh completion script"},
	{"version", "print version, commit, date and Go version"},
	{"help", "print this help, or a command's (anyhook help serve)"},
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage: anyhook <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-11s %s\n", c.name, c.does)
	}
	b.WriteString("\nRun 'anyhook help <command>' or 'anyhook <command> --help' for a command's flags.\n")
	return b.String()
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// run is the whole program, testable: args without the program name.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, rest, stdout, stderr)
	case "send":
		return send.Main(ctx, rest, stdout, stderr)
	case "sink":
		return sink(ctx, rest, stdout, stderr)
	case "listen":
		return listen(ctx, rest, stdout, stderr)
	case "replay":
		return replay(ctx, rest, stdout, stderr)
	case "backfill":
		return backfillCommand(ctx, rest, stdout, stderr)
	case "bench":
		return bench.Main(ctx, rest, stdout, stderr)
	case "soak":
		return soak.Main(ctx, rest, stdout, stderr)
	case "backup":
		return backup(ctx, rest, stdout, stderr)
	case "log":
		return logCommand(ctx, rest, stdout, stderr)
	case "config":
		return configCommand(rest, stdout, stderr)
	case "healthcheck":
		return healthcheck(ctx, rest, stdout, stderr)
	case "completion":
		return completion(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		return version(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			fmt.Fprint(stdout, usage())
			return exitOK
		}
		// anyhook help serve = anyhook serve --help; help log verify too.
		// help help, help --help, --help -h …: this help (never a loop).
		if slices.Contains([]string{"help", "-h", "-help", "--help"}, rest[0]) {
			fmt.Fprint(stdout, usage())
			return exitOK
		}
		return run(ctx, append(slices.Clip(rest), "--help"), stdout, stderr)
	default:
		msg := fmt.Sprintf("unknown command %q", cmd)
		if strings.HasPrefix(cmd, "-") {
			msg = fmt.Sprintf("%s: flags come after the command (anyhook <command> [flags])", cmd)
		} else if s := cli.Suggest(cmd, commandNames()); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		return fail(stderr, exitUsage, fmt.Errorf("%s; run 'anyhook help' for the commands", msg))
	}
}

// fail prints a one-line error and returns the exit status for it; a
// config with several problems gets one line per problem.
func fail(stderr io.Writer, code int, err error) int {
	if ps := config.List(err); len(ps) > 1 {
		for _, p := range ps {
			fmt.Fprintf(stderr, "anyhook: %s\n", p)
		}
		return code
	}
	fmt.Fprintf(stderr, "anyhook: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	return code
}

func newFlags(name string) *flag.FlagSet { return cli.NewFlagSet(name) }

// configFlag adds the --config flag every command that reads the config
// has.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "config `file` (default $ANYHOOK_CONFIG, else ./anyhook.yaml)")
}

// parse parses flags; it returns -1 to go on, or the exit status: 0 after
// printing the command's help (synopsis, then its flags) on stdout for -h
// or --help, 2 after a one-line error on stderr.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, synopsis string) int {
	switch err := cli.Parse(fs, args); {
	case errors.Is(err, flag.ErrHelp):
		cli.Usage(stdout, fs, synopsis)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return exitUsage
	}
	return -1
}

// openStore opens the config's database for a command other than serve.
// An in-memory database is refused: it lives inside its serve process, so
// the command would see an empty one of its own. A command that only
// reads (upgrade false) refuses a store whose schema is older than this
// binary: applying the migrations would change the store for good, and
// the older gateways that serve it would then refuse it. It refuses a
// database without a store too, rather than report on an empty one it
// made at a mistyped path.
func openStore(ctx context.Context, cfg *config.Config, command string, upgrade bool, stderr io.Writer) (store.Store, error) {
	if p, ok := cfg.SQLitePath(); ok && p == ":memory:" {
		return nil, cfg.Errorf("database", "sqlite::memory: lives only inside its anyhook serve process; %s needs a database file (sqlite:PATH) or PostgreSQL", command)
	}
	// An upgrade can hold the command for minutes on a big store: say
	// so, as serve does. A new store's schema is created quietly.
	h := slog.NewTextHandler(stderr, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	st, err := gateway.Open(ctx, cfg, gateway.StoreOptions{Logger: slog.New(cli.Only(h, func(r slog.Record) bool {
		return strings.HasPrefix(r.Message, sqlstore.UpgradeMessage)
	})), NoUpgrade: !upgrade})
	switch {
	case errors.Is(err, sqlstore.ErrUpgradeRefused):
		return nil, fmt.Errorf("%s: %w; run it with the anyhook binary that serves this store, or upgrade the store first (anyhook serve applies the migrations)", command, err)
	case errors.Is(err, sqlstore.ErrNoStore):
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	return st, err
}

// Whether openStore may upgrade the store.
const (
	mayUpgrade = true
	noUpgrade  = false
)

// loadConfig loads the config for command, which reads only the values
// under uses (config.Uses patterns; none: every value, as serve does). A
// value it does not read whose ${VAR} is unset or ${file:PATH} missing is
// skipped, and said so on stderr (docs/configuration.md).
func loadConfig(path string, stderr io.Writer, command string, uses ...string) (*config.Config, error) {
	var u func(string) bool
	if len(uses) > 0 {
		u = config.Uses(uses...)
	}
	cfg, err := config.LoadFor(config.Resolve(path), u)
	if err != nil {
		return nil, err
	}
	for _, s := range cfg.Skipped {
		fmt.Fprintf(stderr, "anyhook: skipped %s (%s does not use it)\n", s, command)
	}
	return cfg, nil
}

// warn prints the config's warnings (config.Config.Warnings), one a line.
func warn(stderr io.Writer, cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stderr, "anyhook: warning: %s\n", w)
	}
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

const serveUsage = `usage: anyhook serve [--config FILE] [--log-level LEVEL]

Runs the gateway: ingest (POST /webhooks/<source>), the delivery workers,
the admin API, the dashboard and /metrics, on the config's listen address
(with admin.listen set, the admin API, dashboard, /metrics and /readyz are
served there instead; tls: serves HTTPS). It listens first, then opens the database and applies pending migrations.
It prints its address and the dashboard's URL, and logs the config's
warnings (a source no destination lists, a secret with white space
around it, a destination posting into this gateway's own source).
SIGINT or SIGTERM stops it gracefully (exit 0). Exit 2: bad flags, a bad
config, the address in use, an unreachable database or an OTEL_* value it
cannot use. OpenTelemetry tracing: the standard OTEL_* environment
variables (OTEL_EXPORTER_OTLP_ENDPOINT …), off unless they name an
exporter (docs/tracing.md).`

func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve")
	cfgPath := configFlag(fs)
	level := fs.String("log-level", "info", "the `level` to log at: debug, info, warn or error")
	if code := parse(fs, args, stdout, stderr, serveUsage); code >= 0 {
		return code
	}
	log, err := newLogger(stderr, *level)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	if before, after := procs.AtLeastTwo(); after != before {
		log.Info("one CPU: GOMAXPROCS raised to 2, so that a thread waiting on the disk does not stop the others (set GOMAXPROCS to choose)", "was", before)
	}
	// The whole config first: a mistake in it is reported as such, even
	// when the address is in use too.
	cfg, err := checkedConfig(*cfgPath)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	// Logged once the gateway runs, so that a mistake found before that
	// is not followed by a line about the collector.
	gcPercent, memLimit, memErr := procs.TuneGC()
	if gcPercent != 0 {
		go procs.FollowHeap(ctx)
	}
	// Listen before the store is opened: an address in use must fail
	// before anything touches (creates, migrates) the database.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fail(stderr, exitUsage, cfg.Errorf("listen", "%v", err))
	}
	ls := gateway.Listeners{Ingest: ln}
	if cfg.AdminSeparate() {
		if ls.Admin, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
			ln.Close()
			return fail(stderr, exitUsage, cfg.Errorf("admin.listen", "%v", err))
		}
	}
	closeListeners := func() {
		ln.Close()
		if ls.Admin != nil {
			ls.Admin.Close()
		}
	}
	// Said once it is sure to start: a config that does not run gets
	// only its errors.
	for _, w := range cfg.Warnings() {
		log.Warn("config: "+w.Msg, "file", w.File, "line", w.Line, "key", w.Key)
	}
	// Tracing is off unless the OTEL_* environment configures an
	// exporter (docs/tracing.md).
	tr, err := tracing.FromEnv(ctx, buildinfo.Version(), log)
	if err != nil {
		closeListeners()
		return fail(stderr, exitUsage, err)
	}
	gopt := gateway.Options{Config: cfg, Logger: log}
	if tr != nil {
		gopt.Tracer = tr.Provider()
		log.Info("tracing on: exporting spans over OTLP")
	}
	g, err := gateway.New(ctx, gopt)
	if err != nil {
		closeListeners()
		if tr != nil {
			tr.Shutdown(context.Background())
		}
		return fail(stderr, exitUsage, err)
	}
	switch {
	case memLimit != 0:
		log.Info("garbage collector's target raised, with a memory limit at 3/4 of the cgroup's (set GOGC or GOMEMLIMIT to choose)",
			"gogc", gcPercent, "memory_limit_mib", memLimit>>20)
	case gcPercent != 0:
		log.Info("garbage collector's target raised (set GOGC to choose)", "gogc", gcPercent)
	}
	if memErr != nil {
		log.Warn("no memory limit set with the raised collector's target; set GOMEMLIMIT in a container with a memory limit", "err", memErr)
	}
	g.StartListeners(ctx, ls)
	ingestTLS, adminTLS := g.TLS()
	dashboard := scheme(ingestTLS != nil) + "://" + loopbackFor(ln.Addr().String()) + "/"
	if ls.Admin == nil {
		fmt.Fprintf(stdout, "anyhook %s listening on %s://%s\n", buildinfo.Version(), scheme(ingestTLS != nil), ln.Addr())
	} else {
		fmt.Fprintf(stdout, "anyhook %s listening on %s://%s (webhooks), admin on %s://%s\n", buildinfo.Version(),
			scheme(ingestTLS != nil), ln.Addr(), scheme(adminTLS != nil), ls.Admin.Addr())
		dashboard = scheme(adminTLS != nil) + "://" + loopbackFor(ls.Admin.Addr().String()) + "/"
	}
	if cfg.DashboardURL != "" {
		dashboard = cfg.DashboardURL
	}
	login := " (no login: admin_token is not set)"
	switch {
	case len(cfg.Tokens) > 0:
		login = " (log in with a token with scope admin or read)"
	case cfg.AdminToken != "":
		login = " (log in with the admin_token)"
	}
	fmt.Fprintf(stdout, "dashboard: %s%s\n", dashboard, login)
	code := exitOK // SIGINT/SIGTERM: a graceful stop exits 0 (SPEC §2)
	select {
	case <-ctx.Done():
		log.Info("stopping: draining: no new requests; in-flight ingest finishes, in-flight attempts get delivery.shutdown to end, then are aborted "+
			"(one not yet sent is released; one sent is recorded as failed under reclaim, left to its lease under hold)",
			"shutdown", cfg.Delivery.Shutdown.D().String())
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
	if tr != nil {
		// After the gateway: the spans of the last requests and attempts
		// are exported too.
		if err := tr.Shutdown(stopCtx); err != nil {
			log.Warn("flushing traces failed", "err", err)
		}
	}
	return code
}
