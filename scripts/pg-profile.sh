#!/usr/bin/env bash
# pg-profile.sh measures what PostgreSQL spends per event under
# `anyhook bench` (BENCHMARKS.md, "PostgreSQL in set-based statements"):
# it starts a PostgreSQL server of its own (initdb in a temporary
# directory, 127.0.0.1:PORT, pg_stat_statements loaded), and for each
# binary given, in turn, ROUNDS times: a fresh database and a CHECKPOINT,
# the bench, then
#
#   - the bench's own figures (events/s, p99, the gateway's CPU per event);
#   - PostgreSQL CPU µs/event: user + system time of the server's
#     processes (the postmaster's children, live and exited) over the run;
#   - exec µs/event and statements/event from pg_stat_statements (nested
#     statements of triggers and foreign keys included);
#   - WAL records and bytes per event (pg_stat_wal).
#
# The server-side figures are divided by EVENTS, the timed events, though
# the server also did the bench's 500 warm-up events and the gateway's
# start: they overstate by ~5 % at 10,000 events (more with fewer), the
# same for every binary.
#
# With -t N it also prints, after each round, the N statements that took
# the most execution time, in µs and calls per event (the query's first
# 100 characters), to find which statement a change made dearer.
#
# Usage: scripts/pg-profile.sh [-n EVENTS] [-r ROUNDS] [-p PORT] [-t N] BINARY...
#   e.g. git worktree add /tmp/old OLD_COMMIT && (cd /tmp/old && go build -o /tmp/before ./cmd/anyhook)
#        go build -o /tmp/after ./cmd/anyhook
#        scripts/pg-profile.sh -r 4 /tmp/before /tmp/after
# PORT (default 5433) must be free.
#
# Not part of the test suite. Needs PostgreSQL's server binaries (initdb,
# pg_ctl: scripts/postgres.sh installs them) and, when run as root, the
# postgres user to own the server.
set -euo pipefail

EVENTS=10000
ROUNDS=1
PORT=5433
TOP=0
while getopts "n:r:p:t:" o; do
	case $o in
	n) EVENTS=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	p) PORT=$OPTARG ;;
	t) TOP=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || {
	echo "usage: $0 [-n EVENTS] [-r ROUNDS] [-p PORT] [-t N] BINARY..." >&2
	exit 2
}

if pg_isready -q -h 127.0.0.1 -p "$PORT" -t 1 >/dev/null 2>&1; then
	echo "$0: a server already answers on port $PORT: choose another with -p" >&2
	exit 2
fi

bindir=$(dirname "$(readlink -f "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")")
dir=$(mktemp -d /tmp/pg-profile.XXXXXX)
as_owner() { if [ "$(id -u)" -eq 0 ]; then su postgres -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" -ne 0 ] || chown postgres "$dir"
bench=
cleanup() {
	status=$?
	set +e
	# A bench still running (the script was signalled) is stopped first:
	# it stops its gateway and removes its files.
	if [ -n "$bench" ]; then
		kill "$bench" 2>/dev/null && wait "$bench" 2>/dev/null
	fi
	as_owner "$bindir/pg_ctl -D $dir/data -m fast stop" >/dev/null 2>&1 || true
	if [ "$status" -ne 0 ] && [ -f "$dir/log" ]; then
		echo "$0: the server's log:" >&2
		cat "$dir/log" >&2
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

as_owner "$bindir/initdb -D $dir/data -U postgres --auth=trust" >/dev/null
cat >>"$dir/data/postgresql.conf" <<EOF
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
EOF
as_owner "$bindir/pg_ctl -D $dir/data -l $dir/log -w start" >/dev/null
psql="env PGOPTIONS=-cclient_min_messages=warning psql -h 127.0.0.1 -p $PORT -U postgres -XAtq"
$psql -c 'CREATE EXTENSION pg_stat_statements'

# cpu is the server's CPU time so far, in clock ticks.
cpu() {
	local pm t c
	pm=$(head -n 1 "$dir/data/postmaster.pid")
	t=$(awk '{print $16 + $17}' "/proc/$pm/stat")
	for c in $(ps --ppid "$pm" -o pid=); do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
hz=$(getconf CLK_TCK)

for round in $(seq 1 "$ROUNDS"); do
	for bin in "$@"; do
		$psql -c 'DROP DATABASE IF EXISTS bench' -c 'CREATE DATABASE bench' -c CHECKPOINT
		$psql -c 'SELECT pg_stat_statements_reset()' -c "SELECT pg_stat_reset_shared('wal')" >/dev/null
		sleep 1
		c0=$(cpu)
		"$bin" bench --concurrency 32 --events "$EVENTS" --provider generic --no-baseline \
			--database "postgres://postgres@127.0.0.1:$PORT/bench?sslmode=disable" >"$dir/bench.out" 2>&1 &
		bench=$!
		if ! wait "$bench"; then
			bench=
			cat "$dir/bench.out" >&2
			exit 1
		fi
		bench=
		out=$(cat "$dir/bench.out")
		sleep 1
		c1=$(cpu)
		ingest=$(echo "$out" | awk '/anyhook ingest/ {print $4 " events/s, p99 " $7 " ms, gateway " $(NF-1) " µs/event"}')
		stmts=$($psql -c "SELECT round(sum(total_exec_time) * 1000 / $EVENTS) || ' exec µs/event, ' || round(sum(calls)::numeric / $EVENTS, 2) || ' statements/event'
			FROM pg_stat_statements WHERE query NOT LIKE 'CREATE%' AND query NOT LIKE '--%'")
		wal=$($psql -c "SELECT round(wal_records::numeric / $EVENTS, 1) || ' WAL records/event, ' || round(wal_bytes / $EVENTS) || ' WAL bytes/event' FROM pg_stat_wal")
		echo "round $round  $bin: $ingest; PostgreSQL $(((c1 - c0) * 1000000 / hz / EVENTS)) CPU µs/event, $stmts, $wal"
		if [ "$TOP" -gt 0 ]; then
			$psql -c "SELECT '  ' || lpad(round(total_exec_time * 1000 / $EVENTS)::text, 5) || ' µs ' || lpad(round(calls::numeric / $EVENTS, 2)::text, 5) || ' calls  ' || left(regexp_replace(query, '\s+', ' ', 'g'), 100)
				FROM pg_stat_statements WHERE query NOT LIKE 'CREATE%' AND query NOT LIKE '--%' ORDER BY total_exec_time DESC LIMIT $TOP"
		fi
	done
done
