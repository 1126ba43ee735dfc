#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser test, if it is not
# there yet. Idempotent: with /usr/bin/chromium present it does nothing.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
	exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo -n"
	else
		echo "chromium.sh: /usr/bin/chromium is missing and this user cannot install packages (not root, no sudo)" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends chromium
test -x /usr/bin/chromium
