#!/usr/bin/env bash
# Usage: tools/netpoll-overlay.sh DIR
#
# Prints the `go build` flag (-overlay=DIR/overlay.json) that builds gwctl with Go's epoll
# poller handing out ready goroutines in the order their descriptors became ready, as
# nginx's event loop serves them. Stock Go walks epoll's events in that order but pushes
# each goroutine onto a list that the scheduler then runs from its head, so within one
# poll the connection that became ready first is served last. Under load that ordering
# alone put gw's p99 at 1.25x nginx's at 16 connections; in order it is at nginx's (README,
# Performance). The change is one loop walking the events from last to first, made to the
# installed Go's own runtime/netpoll_epoll.go in DIR; nothing of Go's is kept in this tree.
#
# `gwctl --version` measures the order a binary really has. When the installed Go's file
# does not have the loop this expects (another Go release), this prints nothing and warns:
# the build goes on with Go's own order, which only widens the latency tail.
set -euo pipefail
dir=${1:?usage: tools/netpoll-overlay.sh DIR}
go=${GO:-go}

[ "$($go env GOOS)" = linux ] || exit 0
src="$($go env GOROOT)/src/runtime/netpoll_epoll.go"
loop='for i := int32(0); i < n; i++ {'
if [ ! -f "$src" ] || [ "$(grep -cF -- "$loop" "$src")" != 1 ] || [ "$(grep -cF 'netpollready(&toRun, pd, mode)' "$src")" != 1 ]; then
	echo "netpoll-overlay.sh: $src is not the netpoll this patch knows ($($go env GOVERSION)); building with Go's own poller order" >&2
	exit 0
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Not named *.go: DIR may be inside the module (bin/), where `go vet ./...` would take a
# .go file for a package of its own.
patched="$dir/netpoll_epoll.go.patched"
sed "s/$loop/for i := n - 1; i >= 0; i-- {/" "$src" >"$patched.new"
mv "$patched.new" "$patched"
printf '{"Replace":{"%s":"%s"}}\n' "$src" "$patched" >"$dir/overlay.json"
echo "-overlay=$dir/overlay.json"
