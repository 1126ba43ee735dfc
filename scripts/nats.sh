#!/usr/bin/env bash
# nats.sh makes sure a NATS server with JetStream answers at
# 127.0.0.1:14222, as the NATS destination tests expect
# (internal/testkit/brokertest). It runs its own server, not the system's:
# its own port (a system nats-server may hold 4222), its own data and log
# under a temporary directory, as the calling user. It is idempotent: when
# the port already answers it changes nothing.
#
#   - nats-server not installed: apt-get install nats-server (Debian's has
#     JetStream);
#   - waits (bounded) until the port answers; exits non-zero saying why
#     when it cannot.
#
# Environment: ANYHOOK_NATS_PORT (default 14222), ANYHOOK_NATS_DIR (default
# ${TMPDIR:-/tmp}/anyhook-nats), NATSWAIT seconds to wait (default 30).
set -euo pipefail

PORT=${ANYHOOK_NATS_PORT:-14222}
DIR=${ANYHOOK_NATS_DIR:-${TMPDIR:-/tmp}/anyhook-nats}
WAIT=${NATSWAIT:-30}

say() { echo "nats.sh: $*" >&2; }
die() {
	say "$*"
	exit 1
}

ready() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

if ready; then
	exit 0
fi

server=$(command -v nats-server || true)
[ -n "$server" ] || server=/usr/sbin/nats-server
if [ ! -x "$server" ]; then
	command -v apt-get >/dev/null 2>&1 || die "nats-server is not installed and apt-get is not available: install nats-server (with JetStream) yourself"
	[ "$(id -u)" -eq 0 ] || die "nats-server is not installed: apt-get install nats-server needs root"
	say "nats-server is not installed; installing it from the distribution's packages"
	env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
	server=/usr/sbin/nats-server
	[ -x "$server" ] || die "apt-get install nats-server finished but $server is missing"
fi

mkdir -p "$DIR/js"
say "starting nats-server with JetStream on 127.0.0.1:$PORT (data and log in $DIR)"
# setsid: the server outlives this script and the shell that ran it.
setsid "$server" -a 127.0.0.1 -p "$PORT" -js -sd "$DIR/js" -P "$DIR/nats.pid" -l "$DIR/nats.log" </dev/null >/dev/null 2>&1 &

deadline=$((SECONDS + WAIT))
until ready; do
	[ "$SECONDS" -lt "$deadline" ] || die "nats-server did not answer on 127.0.0.1:$PORT within ${WAIT}s; see $DIR/nats.log"
	sleep 0.2
done
say "NATS is ready on 127.0.0.1:$PORT"
