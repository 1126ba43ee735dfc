#!/usr/bin/env bash
# The whole test suite: what the README's test command and CI run.
# It makes sure PostgreSQL and the brokers are up (scripts/postgres.sh,
# scripts/nats.sh, scripts/rabbitmq.sh), Chromium is
# installed for the dashboard's browser test (scripts/chromium.sh) and the
# tools that check the shipping files are there (scripts/tools.sh: zsh,
# systemd-analyze, shellcheck, deploy/'s Go modules, staticcheck and
# deadcode), then checks formatting, lints the scripts, vets, runs
# staticcheck and deadcode, runs every test with the race
# detector, checks the shipping files (deploy/: Dockerfile, compose, the
# systemd unit, the Kubernetes manifests, the release archives and the
# licence files), and gives each fuzz target a short run.
set -euo pipefail
cd "$(dirname "$0")/.."

export CI="${CI:-}"
./scripts/postgres.sh
./scripts/nats.sh
./scripts/rabbitmq.sh
./scripts/chromium.sh
./scripts/pebble.sh >/dev/null
./scripts/tools.sh

echo "== gofmt"
# shellcheck disable=SC2046 # one argument per file
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== shellcheck"
shellcheck -S warning scripts/*.sh .ci/run

echo "== go mod tidy"
go mod tidy -diff
(cd deploy && go mod tidy -diff)

echo "== go vet"
go vet ./...
(cd deploy && go vet ./...)

echo "== staticcheck"
gobin="$(go env GOPATH)/bin"
"$gobin/staticcheck" ./...

echo "== deadcode"
# Every main and every test binary is a root, so a helper that only
# another package's tests use is alive. An Example function is
# documentation (go test compiles it, deadcode roots none): not reported.
all=$("$gobin/deadcode" -test ./...)
dead=$(grep -v ': unreachable func: Example' <<<"$all" || true)
if [ -n "$dead" ]; then
	echo "deadcode: unreachable functions (remove them, or use them):"; echo "$dead"; exit 1
fi

echo "== go test -race"
go test -race -count=1 -timeout 15m ./...

# The race detector changes what is allocated, so the tests that measure
# allocation against a documented bound skip under it and run here.
echo "== allocation bounds (without -race)"
go test -count=1 -run 'TestBodyMemoryBound' ./internal/route/

# deploy/ is a module of its own (BuildKit, compose-go and kubeconform stay
# out of the gateway's dependencies); its tests run tools and build the
# release archives, with no concurrency of their own to race.
echo "== deploy (Dockerfile, docker-compose.yml, systemd unit, Kubernetes manifests, release archives, licences)"
(cd deploy && go test -count=1 -timeout 15m ./...)

echo "== fuzz (short)"
fuzztime="${ANYHOOK_FUZZTIME:-5s}"
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "-- $pkg $target"
		# Go's fuzzer can end a short run with a bare "context deadline
		# exceeded" (no failing input: the deadline hit a worker
		# mid-exchange); run such a target once more. A real failure
		# names its input under testdata/fuzz and fails at once.
		if ! out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" 2>&1); then
			echo "$out"
			if grep -q 'Failing input written\|testdata/fuzz' <<<"$out" || ! grep -q 'context deadline exceeded' <<<"$out"; then
				exit 1
			fi
			echo "-- $pkg $target: the fuzzer stopped on its own deadline with no failing input; once more"
			go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
		else
			echo "$out"
		fi
	done
done
echo "== all tests passed"
