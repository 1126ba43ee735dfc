package sqlstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// Migration is one schema migration file.
type Migration struct {
	Version int
	Name    string // the file's base name: 0001_init.sql
	SQL     string
}

// Migrations reads the migrations/*.sql files of fsys in order. Their names
// start with their version, four digits (0001_init.sql), strictly
// increasing. Versions may have gaps: branches that each add a migration
// number them ahead, and a database applies whichever it has not applied
// yet.
func Migrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	ms := make([]Migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil || len(num) != 4 || v < 1 || (len(ms) > 0 && v <= ms[len(ms)-1].Version) {
			return nil, fmt.Errorf("migration %s: want a name starting with a version of four digits, above the one before", base)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	return ms, nil
}

// Apply calls apply for each migration of ms not among the applied
// versions, in order, and stops at the first error; it returns how many
// it applied. A database whose schema is newer than the newest of ms is
// refused, as this binary does not know it. log, when not nil, is told
// before: a migration can hold writes for minutes on a big store, and the
// start of the gateway that applies it is otherwise silent meanwhile (the
// caller says when they are committed: Applied). With upgrade false,
// Apply changes nothing: a schema that lacks some of ms is refused rather
// than upgraded (ErrUpgradeRefused), and a database without one rather
// than given one (ErrNoStore).
func Apply(log *slog.Logger, ms []Migration, applied []int, upgrade bool, apply func(Migration) error) (int, error) {
	if len(ms) == 0 {
		return 0, errors.New("no migrations")
	}
	if top, known := slices.Max(append(applied, 0)), ms[len(ms)-1].Version; top > known {
		return 0, fmt.Errorf("database schema version %d is newer than this binary knows (%d): upgrade anyhook", top, known)
	}
	// A newer binary can add a migration below this one's newest (numbers
	// are not always taken in order): its schema is newer all the same.
	for _, v := range applied {
		if !slices.ContainsFunc(ms, func(m Migration) bool { return m.Version == v }) {
			return 0, fmt.Errorf("database schema has migration %d, which this binary does not know: it is newer than this binary; upgrade anyhook", v)
		}
	}
	var pending []Migration
	for _, m := range ms {
		if !slices.Contains(applied, m.Version) {
			pending = append(pending, m)
		}
	}
	if len(pending) == 0 {
		return 0, nil
	}
	if !upgrade {
		if len(applied) == 0 {
			return 0, ErrNoStore
		}
		lacks := pending[0].Name
		if len(pending) > 1 {
			lacks = fmt.Sprintf("%d migrations, %s to %s", len(pending), lacks, pending[len(pending)-1].Name)
		}
		return 0, fmt.Errorf("%w: it lacks %s", ErrUpgradeRefused, lacks)
	}
	switch {
	case log == nil:
	case len(applied) == 0:
		log.Info("database: creating the schema", "migrations", len(pending))
	default:
		log.Info(UpgradeMessage+"applying migrations; writes wait for them", "migrations", len(pending),
			"first", pending[0].Name, "last", pending[len(pending)-1].Name)
	}
	for _, m := range pending {
		if err := apply(m); err != nil {
			return 0, err
		}
	}
	return len(pending), nil
}

// Apply's errors when it was asked not to upgrade: for a schema older
// than the binary's, and for a database without one.
var (
	ErrUpgradeRefused = errors.New("database schema is older than this binary and this command does not upgrade it")
	ErrNoStore        = errors.New("the database holds no AnyHook store (is the path or DSN right?), and this command does not create one")
)

// UpgradeMessage begins every message logged of an upgrade (not of a new
// store's schema), so that a command can say those alone.
const UpgradeMessage = "database upgrade: "

// Applied tells log, when not nil, that n of ms were committed, begun
// at start (the lock waits included): all of them are a new store's
// schema, fewer an upgrade.
func Applied(log *slog.Logger, ms []Migration, n int, start time.Time) {
	took := time.Since(start).Round(time.Millisecond).String()
	switch {
	case log == nil || n == 0:
	case n == len(ms):
		log.Info("database: schema created", "migrations", n, "took", took)
	default:
		log.Info(UpgradeMessage+"migrations applied", "migrations", n, "took", took)
	}
}

// ScanInt scans a row of one integer column.
func ScanInt(sc Scanner) (int, error) {
	var v int
	return v, sc.Scan(&v)
}

// SchemaVersionQuery reads the newest applied migration's version, 0 for
// none.
const SchemaVersionQuery = `SELECT coalesce(max(version), 0) FROM schema_migrations`

// CheckSchema is Ping's answer from the row of SchemaVersionQuery: a query
// on the schema, not only a round trip, as a database that lost its tables
// (or is not this store's) answers SELECT 1 too.
func CheckSchema(row Scanner) error {
	var version int
	if err := row.Scan(&version); err != nil {
		return store.Unavailable("ping", err)
	}
	if version == 0 {
		return store.Unavailable("ping", errors.New("the database has no schema"))
	}
	return nil
}
