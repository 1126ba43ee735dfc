#!/usr/bin/env bash
# rabbitmq.sh makes sure a RabbitMQ broker answers AMQP at 127.0.0.1:35672,
# as the RabbitMQ destination tests expect (internal/testkit/brokertest). It
# runs a node of its own, not the system's (which may hold 5672): its own
# node name, ports (AMQP 35672, distribution 35673, epmd 34369), data, log
# and Erlang cookie under a temporary directory, no plugins (no management
# UI), and, when run as root, as the unprivileged rabbitmq user. It is
# idempotent: when the port already answers it changes nothing.
#
#   - rabbitmq-server not installed: apt-get install rabbitmq-server;
#   - waits (bounded: a node takes some seconds to boot) until the AMQP port
#     answers; exits non-zero saying why when it cannot.
#
# Environment: ANYHOOK_RABBITMQ_PORT (default 35672; distribution on the
# next port), ANYHOOK_RABBITMQ_DIR (default ${TMPDIR:-/tmp}/anyhook-rabbitmq),
# RABBITWAIT seconds to wait (default 90).
set -euo pipefail

PORT=${ANYHOOK_RABBITMQ_PORT:-35672}
DIR=${ANYHOOK_RABBITMQ_DIR:-${TMPDIR:-/tmp}/anyhook-rabbitmq}
WAIT=${RABBITWAIT:-90}
SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server

say() { echo "rabbitmq.sh: $*" >&2; }
die() {
	say "$*"
	exit 1
}

ready() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

if ready; then
	exit 0
fi

if [ ! -x "$SERVER" ]; then
	command -v apt-get >/dev/null 2>&1 || die "rabbitmq-server is not installed and apt-get is not available: install it yourself"
	[ "$(id -u)" -eq 0 ] || die "rabbitmq-server is not installed: apt-get install rabbitmq-server needs root"
	say "rabbitmq-server is not installed; installing it from the distribution's packages"
	env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	# The package starts the system's node where it can; ours is apart.
	env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
	[ -x "$SERVER" ] || die "apt-get install rabbitmq-server finished but $SERVER is missing"
fi

mkdir -p "$DIR/mnesia" "$DIR/log"
echo '[].' >"$DIR/enabled_plugins"
: >"$DIR/rabbitmq-env.conf" # not /etc/rabbitmq's: it names the system's node
printf 'listeners.tcp.default = 127.0.0.1:%s\n' "$PORT" >"$DIR/rabbitmq.conf"
as=()
if [ "$(id -u)" -eq 0 ] && id rabbitmq >/dev/null 2>&1; then
	chown -R rabbitmq: "$DIR"
	as=(runuser -u rabbitmq --)
fi

say "starting RabbitMQ node anyhook-test on 127.0.0.1:$PORT (data and log in $DIR)"
# setsid: the node outlives this script and the shell that ran it.
setsid "${as[@]}" env HOME="$DIR" \
	RABBITMQ_NODENAME=anyhook-test@localhost \
	RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$PORT" RABBITMQ_DIST_PORT="$((PORT + 1))" \
	ERL_EPMD_PORT=34369 ERL_EPMD_ADDRESS=127.0.0.1 \
	RABBITMQ_CONF_ENV_FILE="$DIR/rabbitmq-env.conf" RABBITMQ_CONFIG_FILE="$DIR/rabbitmq.conf" \
	RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/enabled_plugins" \
	RABBITMQ_MNESIA_BASE="$DIR/mnesia" RABBITMQ_LOG_BASE="$DIR/log" \
	RABBITMQ_PID_FILE="$DIR/rabbitmq.pid" \
	"$SERVER" </dev/null >"$DIR/startup.log" 2>&1 &

deadline=$((SECONDS + WAIT))
until ready; do
	[ "$SECONDS" -lt "$deadline" ] || die "RabbitMQ did not answer on 127.0.0.1:$PORT within ${WAIT}s; see $DIR/startup.log and $DIR/log"
	sleep 0.5
done
say "RabbitMQ is ready on 127.0.0.1:$PORT"
