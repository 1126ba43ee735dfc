// Package inbox makes webhook handlers correct when the same event arrives
// more than once, arrives while its twin is still being processed, arrives
// out of order, or arrives at a process that then crashes. It keeps its
// bookkeeping in the receiver's own database, next to the business data, so
// that "I processed this" and "here is what processing changed" commit
// together.
//
// The package imports only the standard library. Pick an adapter for your
// database access library and hand it to New:
//
//   - inboxsql: database/sql with SQLite (modernc.org/sqlite) or PostgreSQL
//     (github.com/jackc/pgx/v5/stdlib); callbacks receive *sql.Tx;
//   - inboxpgx: pgx v5 natively; callbacks receive pgx.Tx.
//
// Call Migrate once at startup; it creates the inbox_events and
// inbox_versions tables if they are missing, upgrades tables an older
// version created, and checks that the database speaks the adapter's
// dialect. Bound the pool of a *sql.DB (SetMaxOpenConns and
// SetMaxIdleConns, 8–16): docs/inbox.md, "Pool sizing", has measurements.
//
// # Patterns
//
// Inbox.Apply runs a function in a transaction that also inserts the
// processed row for (source, handler, event id): for writes that can roll back.
// A duplicate is reported as Duplicate without running the function; a twin
// still in flight as InFlight; the same id with a different body as Conflict.
//
// Inbox.Do is claim-then-commit for side effects that cannot roll back (a
// charge capture, an email). The claim commits first, the effect runs, then a
// fenced finish marks it done. Each call declares what happens when a claim
// goes stale (its owner crashed or hung): Reclaim or Hold. There is no
// default. To combine Apply and Do for one event, give each step its own
// handler name and stop at the first outcome that is not Processed or
// Duplicate (see the example of Do after Apply).
//
// # Stale claims
//
// A stale claim is met by the next delivery of its event, but the sender
// may have given up. Inbox.Sweep (on a timer: Inbox.NewSweeper, Start,
// Stop) applies each expired claim's stored policy without a delivery:
// Hold parks it (Inbox.Held lists it, Inbox.Resolve settles it), Reclaim
// releases it so that the next delivery runs the effect (Inbox.Released
// lists it until then). Config.OnStale and Config.Logger report each one.
//
// Inbox.Advance is a per-object version guard used in your transaction, and
// Machine checks state transitions.
//
// Handler is the HTTP glue: bounded body, signature first (AnyHook's Standard
// Webhooks signature or your own Verifier), the event id taken only from
// what the verifier authenticated (HandlerConfig.EventID), outcomes mapped
// to status codes by Outcome.HTTPStatus, with a Retry-After that says when
// a retry can find something changed.
//
// Package inboxtest injects faults and real crashes (exit at a Point, or
// kill -9 when the test says) and ages claims, for the sender-gave-up
// scenario among others.
//
// The user guide is docs/inbox.md in the AnyHook repository.
package inbox
