#!/usr/bin/env bash
# Usage: tools/runtime-overlay.sh DIR
#
# Prints the `go build` flag (-overlay=DIR/overlay.json) that builds gwctl with two lines of
# Go's runtime changed, each measured against nginx (README, Performance). The changed files
# are the installed Go's own, rewritten into DIR; nothing of Go's is kept in this tree.
# `gwctl --version` measures whether a binary has each change.
#
# 1. runtime/netpoll_epoll.go: the poller hands out ready goroutines in the order their
#    descriptors became ready, as nginx's event loop serves them. Stock Go walks epoll's
#    events in that order but pushes each goroutine onto a list that the scheduler runs
#    from its head, so within one poll the connection that became ready first is served
#    last: gw's p99 was 1.25x nginx's at 16 connections for that alone.
# 2. runtime/proc.go: the runtime's monitor thread (sysmon) keeps its pace when a system
#    call wakes it from its deep sleep. Stock Go restarts it at a 20 us period then, betting
#    that a goroutine is about to block in a system call and its processor must be taken
#    back. A worker makes its hot-path calls raw and never blocks in one, so the bet never
#    pays; but every upstream connection re-dialled (keepalive_pool.requests) and every
#    client connection accepted goes through net's system calls, and each restart then
#    costs a few dozen monitor wake-ups on the worker's CPU: keeping the pace saved 1.8%
#    of its CPU per request at 16 connections, 4.0% with limit-count and prometheus.
#
# When the installed Go's file does not have the lines a change expects (another Go
# release), that change is left out with a warning: the build goes on, only slower.
set -euo pipefail
dir=${1:?usage: tools/runtime-overlay.sh DIR}
go=${GO:-go}

[ "$($go env GOOS)" = linux ] || exit 0
runtime="$($go env GOROOT)/src/runtime"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
replace=()

# patch FILE WANT SED: writes DIR/FILE.patched from the runtime's FILE through the sed
# script SED when WANT (a fixed string) is on exactly one line of it.
patch() {
	local file=$1 want=$2 script=$3
	local src="$runtime/$file"
	if [ ! -f "$src" ] || [ "$(grep -cF -- "$want" "$src")" != 1 ]; then
		echo "runtime-overlay.sh: $src is not the one this change knows ($($go env GOVERSION)); building without it" >&2
		return
	fi
	# Not named *.go: DIR may be inside the module (bin/), where `go vet ./...` would take a
	# .go file for a package of its own.
	local patched="$dir/$file.patched"
	sed "$script" "$src" >"$patched.new"
	mv "$patched.new" "$patched"
	replace+=("\"$src\":\"$patched\"")
}

patch netpoll_epoll.go 'for i := int32(0); i < n; i++ {' \
	's/for i := int32(0); i < n; i++ {/for i := n - 1; i >= 0; i-- {/'
patch proc.go 'if syscallWake {' \
	's/if syscallWake {/if false \&\& syscallWake { \/\/ gw: keep the pace (tools\/runtime-overlay.sh)/'

[ ${#replace[@]} -gt 0 ] || exit 0
(IFS=,; printf '{"Replace":{%s}}\n' "${replace[*]}") >"$dir/overlay.json"
echo "-overlay=$dir/overlay.json"
