#!/usr/bin/env bash
# licenses.sh writes THIRD_PARTY_LICENSES for the anyhook binary: the
# licence files of every Go module compiled into it (for the GOOS and
# GOARCH in the environment, default this machine's) and of the Go
# standard library and runtime, which it includes too. MIT and BSD licences
# ask that their text travel with a binary distribution; release archives
# (scripts/release.sh) and the container image (Dockerfile) carry this file.
#
#   scripts/licenses.sh OUT
#
# It reads the module cache (go mod download fills it) and asks no
# registry. It fails when a module has no licence file.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/licenses.sh OUT}

export CGO_ENABLED=0
goos=$(go env GOOS)
goarch=$(go env GOARCH)
goroot=$(go env GOROOT)
modules=$(go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}' ./cmd/anyhook | sort -u)

rule() { printf '%s\n' "================================================================================"; }
{
	echo "Third-party software in the anyhook binary for $goos/$goarch"
	echo
	echo "The anyhook binary is built from AnyHook (Apache License 2.0, see LICENSE"
	echo "and NOTICE) and includes the Go standard library and runtime and the Go"
	echo "modules below. Each one's licence files follow, as the module ships them."
	echo
	echo "  Go standard library and runtime $(go env GOVERSION)"
	while read -r path version _; do
		echo "  $path $version"
	done <<<"$modules"
	echo
	rule
	echo "Go standard library and runtime $(go env GOVERSION)"
	rule
	echo
	cat "$goroot/LICENSE"
	while read -r path version dir; do
		[ -n "$path" ] || continue
		files=$(find "$dir" -maxdepth 1 -type f \( -iname 'licen[cs]e*' -o -iname 'copying*' -o -iname 'notice*' -o -iname 'patents*' \) | LC_ALL=C sort)
		if [ -z "$files" ]; then
			echo "licenses.sh: $path $version has no licence file in $dir" >&2
			exit 1
		fi
		echo
		rule
		echo "$path $version"
		rule
		for f in $files; do
			echo
			echo "--- $(basename "$f")"
			echo
			cat "$f"
		done
	done <<<"$modules"
} >"$out"
