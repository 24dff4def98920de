#!/usr/bin/env bash
# Refreshes cmd/gwctl/default.pgo, the CPU profile Go's compiler optimizes gwctl with
# (profile-guided optimization: `go build ./cmd/gwctl` picks the file up by itself). The
# profile is one worker's, taken by the benchmark runner over a wrk run of the
# limit-count + prometheus route, which goes through the whole request path. Refresh it
# after a change to that path; a stale profile still builds, it just helps less.
# Needs what benchmark/run.sh needs (wrk, nginx, taskset) and takes about two minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# gwctl and its profiling twin as `make build` builds them (tools/runtime-overlay.sh).
overlay=$(tools/runtime-overlay.sh "$work/goruntime")
for tool in runner upstream; do
	go build -o "$work/$tool" "./benchmark/$tool"
done
go build $overlay -o "$work/profgw" ./benchmark/profgw
go build $overlay -o "$work/gwctl" ./cmd/gwctl
ulimit -n "$(ulimit -Hn | sed 's/unlimited/20000/')" 2>/dev/null || true

GW_BENCH_PROFILE=1 "$work/runner" -gwctl "$work/gwctl" -upstream "$work/upstream" -profgw "$work/profgw" \
	-workers 1 -duration 20s -warmup 2s -rounds 1 -out "$work/results" -work "$work/tmp"
mapfile -t profiles < <(find "$work/tmp" -name 'worker-*.pprof')
if [ ${#profiles[@]} -eq 0 ]; then
	echo "pgo.sh: the runner wrote no worker profile" >&2
	exit 1
fi
go tool pprof -proto "${profiles[@]}" >"$work/default.pgo"
mv "$work/default.pgo" cmd/gwctl/default.pgo
echo "wrote cmd/gwctl/default.pgo from ${#profiles[@]} profile(s)"
