package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/backfill"
	"github.com/anyhook/anyhook/internal/gateway"
)

const backfillUsage = `usage: anyhook backfill [--config FILE] --source NAME (--since D | --from T [--to T]) [--dry-run] [--json]

After an outage, fetches from the provider's API the events it could not
deliver, and records the missing ones: each as the event its webhook would
have been (the provider's event id as dedup key, its type and ordering),
marked origin backfill, and delivered with X-AnyHook-Backfill: true.
Events the gateway already has are counted as already had and left as
they are, so a backfill can be run again: only what is missing becomes new.

The source needs an api_key (and, for GitHub, its hook: backfill:), see
docs/backfill.md. Stripe: GET /v1/events over the window; Paddle: GET
/events down to the window; GitHub: the hook's deliveries the gateway
does not have are redelivered, and arrive as webhooks.

--since is a duration ago (6h, 24h); --from and --to are RFC 3339 times
(--to defaults to now). --dry-run lists and counts, and records nothing.
Progress goes to stderr; the summary to stdout (--json: as JSON, a
failure too as {"error", "exit"}).

It writes to the database directly: a running gateway's workers deliver
what it records. Exit 1: the provider refused (a bad api_key) or the
store failed; what was recorded stays, and a rerun completes it. Exit 2:
bad flags or config, a source without api_key, an unreachable database.`

// backfillReport is what backfill prints with --json.
type backfillReport struct {
	Source string    `json:"source"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to,omitzero"`
	DryRun bool      `json:"dry_run"`
	backfill.Progress
}

func backfillCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("backfill")
	cfgPath := configFlag(fs)
	source := fs.String("source", "", "the `source` to backfill (it needs an api_key)")
	since := fs.String("since", "", "backfill the last `D` (a duration: 6h, 24h)")
	from := fs.String("from", "", "backfill from `T` (RFC 3339)")
	to := fs.String("to", "", "with --from: up to `T` (RFC 3339; default now)")
	dryRun := fs.Bool("dry-run", false, "count what would be recorded; record nothing")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if code := parse(fs, args, stdout, stderr, backfillUsage); code >= 0 {
		return code
	}
	bad := func(code int, err error) int {
		if *asJSON {
			b, _ := json.Marshal(struct {
				Error string `json:"error"`
				Exit  int    `json:"exit"`
			}{strings.TrimPrefix(err.Error(), "backfill: "), code})
			fmt.Fprintf(stdout, "%s\n", b)
			return code
		}
		return fail(stderr, code, err)
	}
	if *source == "" {
		return bad(exitUsage, errors.New("backfill: give --source NAME (anyhook backfill --help)"))
	}
	start, end, err := backfill.Window(*since, *from, *to, time.Now())
	if err != nil {
		return bad(exitUsage, fmt.Errorf("backfill: %w", err))
	}
	cfg, err := loadConfig(*cfgPath, stderr, "backfill", "database", "sources."+*source, "destinations.*.sources", "destinations.*.filter")
	if err != nil {
		return bad(exitUsage, err)
	}
	st, err := openStore(ctx, cfg, "backfill", mayUpgrade, stderr)
	if err != nil {
		return bad(exitUsage, err)
	}
	defer st.Close()
	h, err := gateway.IngestHandler(cfg, st, *source)
	if err != nil {
		return bad(exitUsage, err)
	}
	b := gateway.NewBackfiller(cfg, h, st)
	if err := b.Check(*source); err != nil {
		return bad(exitUsage, fmt.Errorf("backfill: %w", err))
	}
	rep := backfillReport{Source: *source, From: start, To: end, DryRun: *dryRun}
	rep.Progress, err = b.Run(ctx, *source, start, end, *dryRun, func(p backfill.Progress) {
		fmt.Fprintf(stderr, "backfill %s: %d %s fetched, %d found, %d already had, %d new\n",
			*source, p.Pages, plural(p.Pages, "page", "pages"), p.Found, p.AlreadyHad, p.New)
	})
	if err != nil {
		return bad(exitFail, fmt.Errorf("backfill: %s: %w (%s)", *source, err, afterFailure(rep.Progress)))
	}
	if *asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	verb := "recorded"
	if *dryRun {
		verb = "would record"
	}
	p := rep.Progress
	fmt.Fprintf(stdout, "backfill %s: %d %s found in %d %s; %d already had; %s %d new\n",
		*source, p.Found, plural(p.Found, "event", "events"), p.Pages, plural(p.Pages, "page", "pages"), p.AlreadyHad, verb, p.New)
	if p.Redelivered > 0 {
		fmt.Fprintf(stdout, "asked the provider to redeliver %d %s the gateway does not have; they arrive as webhooks\n", p.Redelivered, plural(p.Redelivered, "delivery", "deliveries"))
	}
	if p.RateLimited > 0 {
		fmt.Fprintf(stdout, "waited out %d rate-limit %s (429)\n", p.RateLimited, plural(p.RateLimited, "answer", "answers"))
	}
	if *dryRun {
		fmt.Fprintln(stdout, "dry run: nothing was recorded")
	}
	return exitOK
}

// afterFailure says what a failed backfill left and what to do next: a
// failure before anything was recorded (a refused key) left nothing, and a
// rerun alone would fail alike.
func afterFailure(p backfill.Progress) string {
	if p.New == 0 {
		return "nothing was recorded; fix the cause and run it again"
	}
	return fmt.Sprintf("the %d new %s recorded before the failure stay; run it again to complete it", p.New, plural(p.New, "event", "events"))
}
