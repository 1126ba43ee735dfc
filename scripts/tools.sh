#!/usr/bin/env bash
# tools.sh installs the Debian packages that the checks of the shipping
# files need, if they are missing. Idempotent: with every command present
# it does nothing, and asks no registry.
#
#   zsh              the zsh completion test (zsh -n, compinit)
#   systemd-analyze  verifying deploy/systemd/anyhook.service (package systemd)
#   (shellcheck)     lints scripts/*.sh and .ci/run
#
# and the Go analysers test.sh runs, pinned, built once into GOPATH/bin
# (kept there between runs: a cached GOPATH builds nothing):
#
#   staticcheck      honnef.co/go/tools/cmd/staticcheck
#   deadcode         golang.org/x/tools/cmd/deadcode
#
# The Go modules that deploy/ tests with (buildkit's Dockerfile parser and
# linter, compose-go, kubeconform) are pinned by deploy/go.sum and cached
# in the module cache; they are downloaded here first, with retries, so that
# a slow proxy fails this step with a clear message rather than a test.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "tools.sh: $*" >&2; }

missing=()
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)

if [ ${#missing[@]} -gt 0 ]; then
	SUDO=""
	if [ "$(id -u)" != 0 ]; then
		if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
			SUDO="sudo -n"
		else
			say "missing ${missing[*]} and this user cannot install packages (not root, no passwordless sudo)"
			exit 1
		fi
	fi
	say "installing ${missing[*]} from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get -o Acquire::Retries=3 update -qq
	$SUDO apt-get -o Acquire::Retries=3 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The deploy checks' Go modules: pinned by deploy/go.sum, kept in the module
# cache (GOMODCACHE), so this is quick after the first run.
if [ -f deploy/go.mod ]; then
	for try in 1 2 3; do
		if (cd deploy && go mod download); then
			break
		fi
		[ "$try" -lt 3 ] || { say "go mod download in deploy/ failed 3 times"; exit 1; }
		say "go mod download in deploy/ failed; retrying in $((try * 10))s"
		sleep $((try * 10))
	done
fi

# The Go analysers, at the versions below: installed when GOPATH/bin lacks
# them or holds another version (go version -m reads the one it holds).
gobin="$(go env GOPATH)/bin"
for tool in honnef.co/go/tools/cmd/staticcheck@v0.8.2 golang.org/x/tools/cmd/deadcode@v0.39.0; do
	path=${tool%@*}
	version=${tool#*@}
	bin="$gobin/${path##*/}"
	if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | awk '$1 == "mod" { print $3 }' | grep -qx "$version"; then
		continue
	fi
	say "installing $tool"
	for try in 1 2 3; do
		if go install "$tool"; then
			break
		fi
		[ "$try" -lt 3 ] || { say "go install $tool failed 3 times"; exit 1; }
		say "go install $tool failed; retrying in $((try * 10))s"
		sleep $((try * 10))
	done
done
