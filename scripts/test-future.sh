#!/usr/bin/env bash
# test-future.sh runs the whole suite (scripts/test.sh) with the machine's
# clock moved ahead (default one year), then moves it back: no test may
# depend on today's date. Go reads the clock without libc, so libfaketime
# cannot move it; this sets the system clock itself. It needs root (or
# CAP_SYS_TIME), moves the clock of everything on the machine for the run
# (PostgreSQL's now() included, as a real future would), and is meant for
# a machine of its own — never CI's.
#
#   sudo ./scripts/test-future.sh [SECONDS_AHEAD]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ahead=${1:-31536000}
start=$(date +%s)
restore() {
	now=$(date +%s)
	date -s "@$((now - ahead))" >/dev/null
	echo "test-future.sh: clock back at $(date -u)"
}
date -s "@$((start + ahead))" >/dev/null || { echo "test-future.sh: cannot set the clock (root?)" >&2; exit 2; }
trap restore EXIT
echo "test-future.sh: clock at $(date -u)"
CI=true ./scripts/test.sh
