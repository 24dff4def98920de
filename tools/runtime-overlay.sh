#!/usr/bin/env bash
# Usage: tools/runtime-overlay.sh DIR
#
# Prints the `go build` flag (-overlay=DIR/overlay.json) that builds gwctl with Go's runtime
# changed by the patches in tools/goruntime/, each measured against nginx and written up as
# the Go issue it answers beside it (benchmark/README.md, section Where the CPU goes):
#
#   netpoll-order.patch  the poller runs one poll's goroutines in the order their
#                        descriptors became ready, as nginx's event loop serves them
#   sysmon-pace.patch    the monitor thread keeps its pace when a system call wakes it
#
# Each patch changes one file under GOROOT. It is applied to a copy of the installed Go's
# file, written into DIR; nothing of Go's is kept in this tree. `gwctl --version` measures
# whether a binary has each change.
#
# A patch that does not apply exactly (another Go release moved or changed its lines; the
# patch is tried with no fuzz, so a line that is not the one measured is never changed) is
# left out with a warning: the build goes on, only slower. benchmark/README.md ("Where the CPU goes") says how
# to check, re-derive or drop a patch on a new Go release.
set -euo pipefail
dir=${1:?usage: tools/runtime-overlay.sh DIR}
go=${GO:-go}
patches="$(cd "$(dirname "$0")" && pwd)/goruntime"

[ "$($go env GOOS)" = linux ] || exit 0
goroot=$($go env GOROOT)
goversion=$($go env GOVERSION)
if ! command -v patch >/dev/null; then
	echo "runtime-overlay.sh: no patch(1) on PATH; building with Go's own runtime" >&2
	exit 0
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
replace=()

for p in "$patches"/*.patch; do
	name=$(basename "$p" .patch)
	file=$(sed -n 's|^+++ b/||p' "$p")
	if [ -z "$file" ] || [ "$(printf '%s\n' "$file" | wc -l)" != 1 ]; then
		echo "runtime-overlay.sh: $p must change exactly one file" >&2
		exit 1
	fi
	src="$goroot/$file"
	# Not named *.go: DIR may be inside the module (bin/), where `go vet ./...` would take a
	# .go file for a package of its own.
	patched="$dir/$(basename "$file").patched"
	if [ -f "$src" ] && patch --silent --forward --fuzz=0 --reject-file=- -o "$patched.new" "$src" "$p" >/dev/null 2>&1; then
		mv "$patched.new" "$patched"
		replace+=("\"$src\":\"$patched\"")
	elif [ -f "$src" ] && patch --silent --dry-run --reverse --fuzz=0 "$src" "$p" >/dev/null 2>&1; then
		rm -f "$patched.new"
		echo "runtime-overlay.sh: $goversion already has $name (tools/goruntime/$name.patch): drop the patch" >&2
	else
		rm -f "$patched.new"
		echo "runtime-overlay.sh: tools/goruntime/$name.patch does not apply to $goversion's $file; building without it (benchmark/README.md, section Where the CPU goes, says what to do)" >&2
	fi
done

[ ${#replace[@]} -gt 0 ] || exit 0
(IFS=,; printf '{"Replace":{%s}}\n' "${replace[*]}") >"$dir/overlay.json"
echo "-overlay=$dir/overlay.json"
