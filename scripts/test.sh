#!/usr/bin/env bash
# The whole test suite: what the README's test command and CI run.
# It makes sure PostgreSQL is up (scripts/postgres.sh) and Chromium is
# installed for the dashboard's browser test (scripts/chromium.sh), then
# checks formatting, vets, runs every test with the race detector, and gives
# each fuzz target a short run.
set -euo pipefail
cd "$(dirname "$0")/.."

export CI="${CI:-}"
./scripts/postgres.sh
./scripts/chromium.sh

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go mod tidy"
go mod tidy -diff

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 15m ./...

echo "== fuzz (short)"
fuzztime="${ANYHOOK_FUZZTIME:-5s}"
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "-- $pkg $target"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
echo "== all tests passed"
