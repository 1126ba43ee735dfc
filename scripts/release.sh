#!/usr/bin/env bash
# release.sh builds anyhook's release archives: static binaries (pure Go,
# CGO_ENABLED=0, -trimpath) for linux/amd64, linux/arm64 and darwin/arm64,
# each in a .tar.gz with LICENSE, NOTICE, README.md and THIRD_PARTY_LICENSES,
# and SHA256SUMS over the archives.
#
#   scripts/release.sh [--snapshot] [--out DIR]      (default DIR: dist)
#
# The version is $VERSION, else the tag at HEAD (vMAJOR.MINOR.PATCH[-PRE]);
# the tree must be clean. --snapshot builds any tree, as
# v0.0.0-snapshot-<commit>[-dirty]. The version, the commit and its date
# are stamped with -ldflags -X (internal/buildinfo), so `anyhook version`
# reports them. The same commit and Go version give the same bytes: no
# build paths, no VCS stamp of the checkout, archive times from the commit
# (SOURCE_DATE_EPOCH).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(linux/amd64 linux/arm64 darwin/arm64)
out=dist
snapshot=0
while [ $# -gt 0 ]; do
	case $1 in
	--snapshot) snapshot=1 ;;
	--out) out=${2:?--out needs a directory}; shift ;;
	--out=*) out=${1#--out=} ;;
	-h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "release.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

die() { echo "release.sh: $*" >&2; exit 1; }

commit=$(git rev-parse HEAD)
epoch=$(git show -s --format=%ct HEAD)
date=$(TZ=UTC0 git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)
dirty=""
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	dirty=1
fi
if [ "$snapshot" = 1 ]; then
	version=${VERSION:-v0.0.0-snapshot-$(git rev-parse --short=12 HEAD)${dirty:+-dirty}}
else
	[ -z "$dirty" ] || die "the tree has uncommitted changes (commit them, or build a --snapshot)"
	version=${VERSION:-$(git describe --tags --exact-match --match 'v*' 2>/dev/null || true)}
	[ -n "$version" ] || die "no version: tag HEAD (git tag v1.2.3), set VERSION, or build a --snapshot"
fi
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "version $version is not vMAJOR.MINOR.PATCH[-PRE]"

pkg=github.com/anyhook/anyhook/internal/buildinfo
ldflags="-s -w -X $pkg.version=$version -X $pkg.commit=$commit -X $pkg.date=$date"
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

archives=()
for target in "${targets[@]}"; do
	goos=${target%/*} goarch=${target#*/}
	name=anyhook_${version#v}_${goos}_${goarch}
	dir=$work/$name
	mkdir -p "$dir"
	echo "release.sh: building $name" >&2
	CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch \
		go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$dir/anyhook" ./cmd/anyhook
	GOOS=$goos GOARCH=$goarch scripts/licenses.sh "$dir/THIRD_PARTY_LICENSES"
	cp LICENSE NOTICE README.md "$dir/"
	chmod 0755 "$dir/anyhook"
	chmod 0644 "$dir/LICENSE" "$dir/NOTICE" "$dir/README.md" "$dir/THIRD_PARTY_LICENSES"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
		--format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		-C "$work" -cf - "$name" | gzip -n -9 >"$out/$name.tar.gz"
	archives+=("$name.tar.gz")
done
(cd "$out" && sha256sum "${archives[@]}" >SHA256SUMS)
echo "release.sh: anyhook $version ($commit, $date) in $out:" >&2
cat "$out/SHA256SUMS" >&2
