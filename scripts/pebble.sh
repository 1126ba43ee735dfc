#!/usr/bin/env bash
# Installs Let's Encrypt's Pebble, a small ACME server for tests, for the
# gateway's ACME test (internal/gateway TestACME), if it is not there yet:
# built from its Go module at the pinned version into
# $(go env GOPATH)/bin/pebble-VERSION. Idempotent. Prints the binary's path.
set -euo pipefail
version=v2.10.3
bin="$(go env GOPATH)/bin"
target="$bin/pebble-$version"
if [ ! -x "$target" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	GOBIN="$tmp" GOFLAGS='' go install "github.com/letsencrypt/pebble/v2/cmd/pebble@$version" >&2
	mkdir -p "$bin"
	mv "$tmp/pebble" "$target"
fi
echo "$target"
