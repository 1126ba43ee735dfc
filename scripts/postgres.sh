#!/usr/bin/env bash
# postgres.sh makes sure a PostgreSQL server answers at 127.0.0.1:5432 for
# user postgres with trust authentication, as the PostgreSQL tests expect
# (internal/testkit/pgtest). It is idempotent: when such a server already answers it
# changes nothing.
#
#   - server not answering: start the Debian cluster
#     (pg_ctlcluster --skip-systemctl-redirect VERSION main start);
#   - PostgreSQL not installed: apt-get install postgresql, start it and
#     trust local TCP connections from 127.0.0.1 and ::1;
#   - waits (bounded) until the server accepts connections; exits non-zero
#     with a message saying why when it cannot.
#
# Environment: PGWAIT seconds to wait for readiness (default 60).
set -euo pipefail

HOST=127.0.0.1
PORT=5432
WAIT=${PGWAIT:-60}

say() { echo "postgres.sh: $*" >&2; }
die() {
	say "$*"
	exit 1
}

# as_root runs a command as root: directly, or through passwordless sudo.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		die "need root to run '$*' (run as root or configure passwordless sudo)"
	fi
}

ready() { pg_isready -q -h "$HOST" -p "$PORT" -U postgres -t 2 >/dev/null 2>&1; }
can_login() { psql -h "$HOST" -p "$PORT" -U postgres -d postgres -w -XAtqc 'SELECT 1' >/dev/null 2>&1; }

# version is the newest installed cluster version under /etc/postgresql.
version() { ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1; }

wait_ready() {
	local deadline=$((SECONDS + WAIT))
	until ready; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 1
	done
}

installed() { command -v pg_isready >/dev/null 2>&1 && [ -n "$(version)" ]; }

# Fast path: already up and trusting us.
if command -v pg_isready >/dev/null 2>&1 && ready && can_login; then
	exit 0
fi

fresh=0
if ! installed; then
	command -v apt-get >/dev/null 2>&1 || die "PostgreSQL is not installed and apt-get is not available: install PostgreSQL yourself and start it on $HOST:$PORT with trust auth for user postgres"
	say "PostgreSQL is not installed; installing it from the distribution's packages"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	# pg_isready and friends live in /usr/lib/postgresql/VERSION/bin when the
	# wrappers in /usr/bin are absent.
	installed || die "apt-get install postgresql finished but no cluster was found under /etc/postgresql"
	fresh=1
fi
VER=$(version)

if [ ! -d "/etc/postgresql/$VER/main" ]; then
	say "creating cluster $VER/main"
	as_root pg_createcluster "$VER" main >/dev/null
fi

if [ "$fresh" -eq 1 ]; then
	HBA=/etc/postgresql/$VER/main/pg_hba.conf
	MARK="# anyhook scripts/postgres.sh: trust local TCP"
	if ! as_root grep -qF "$MARK" "$HBA"; then
		say "trusting TCP connections from 127.0.0.1 and ::1 in $HBA"
		# First match wins in pg_hba.conf, so the trust lines go on top.
		as_root sed -i "1i $MARK\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust" "$HBA"
	fi
fi

if ! ready; then
	say "starting PostgreSQL $VER/main"
	as_root pg_ctlcluster --skip-systemctl-redirect "$VER" main start ||
		ready || die "could not start PostgreSQL $VER/main; see /var/log/postgresql/postgresql-$VER-main.log"
elif [ "$fresh" -eq 1 ]; then
	as_root pg_ctlcluster --skip-systemctl-redirect "$VER" main reload
fi

wait_ready || die "PostgreSQL $VER/main did not accept connections on $HOST:$PORT within ${WAIT}s; see /var/log/postgresql/postgresql-$VER-main.log"
can_login || die "PostgreSQL answers on $HOST:$PORT but user postgres cannot log in without a password: add 'host all all 127.0.0.1/32 trust' at the top of /etc/postgresql/$VER/main/pg_hba.conf and reload"
say "PostgreSQL $VER is ready on $HOST:$PORT"
