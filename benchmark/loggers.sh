#!/usr/bin/env bash
# http-logger's cost on one gw worker: the same route with and without it, side by side.
#
#   benchmark/loggers.sh [--duration 5s] [--rounds 5] [--connections 64] [--warmup 2s]
#
# gw runs one worker pinned to CPU 0; wrk, the upstream and the collector (the upstream
# server again, which answers the POSTs) share CPU 1. Each round measures both routes in
# an order rotated per round; the report gives the medians over rounds of req/s and gw's
# CPU µs per request (master + worker, from /proc/<pid>/stat, the batch processor's POSTs
# included since they run in the worker), and each as a ratio to the route without the
# logger in the same round. The machine is shared: read the ratios, not the absolute
# figures. Needs Go, wrk, taskset.
set -euo pipefail

duration=5s rounds=5 connections=64 warmup=2s
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--connections) connections=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	-h | --help) sed -n '4,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "loggers.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
for c in go wrk taskset; do
	command -v "$c" >/dev/null || { echo "loggers.sh: needs $c (Debian: apt-get install -y wrk util-linux)" >&2; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "loggers.sh: needs 2 CPUs, one for gw and one for the load" >&2; exit 1; }

cd "$(dirname "$0")/.."
tmp=benchmark/results/tmp/loggers
rm -rf "$tmp" && mkdir -p "$tmp/bin" "$tmp/gw/conf"
. benchmark/lib.sh
overlay=$(tools/runtime-overlay.sh "$tmp/bin/goruntime")
go build $overlay -o "$tmp/bin/gwctl" ./cmd/gwctl
go build -o "$tmp/bin/upstream" ./benchmark/upstream

data=$(port) admin=$(port) metrics=$(port) up=$(port)
pids=()
cleanup() {
	"$tmp/bin/gwctl" stop --prefix "$tmp/gw" >/dev/null 2>&1 || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

taskset -c 1 "$tmp/bin/upstream" -listen "127.0.0.1:$up" >"$tmp/upstream.log" 2>&1 &
pids+=($!)
printf 'node_listen:\n  - "127.0.0.1:%s"\nadmin:\n  listen: "127.0.0.1:%s"\nprometheus:\n  export_addr: "127.0.0.1:%s"\n' \
	"$data" "$admin" "$metrics" >"$tmp/gw/conf/config.yaml"
taskset -c 0 "$tmp/bin/gwctl" start --workers 1 --prefix "$tmp/gw" >/dev/null
sleep 0.5

key=edd1c9f034335f136f87ad84b625c8f1
put() { # put <id> <uri> <plugins>
	curl -fsS -o /dev/null "http://127.0.0.1:$admin/apisix/admin/routes/$1" -H "X-API-KEY: $key" -X PUT \
		-d "{\"uri\":\"$2\",\"plugins\":{$3},\"upstream\":{\"type\":\"roundrobin\",\"nodes\":{\"127.0.0.1:$up\":1}}}"
}
put 1 /plain ''
put 2 /logged "\"http-logger\":{\"uri\":\"http://127.0.0.1:$up/log\"}"
for path in /plain /logged; do
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$data$path")
	[ "$code" = 200 ] || { echo "loggers.sh: $path answers $code" >&2; tail "$tmp/gw/logs/error.log" >&2; exit 1; }
done

master=$(cat "$tmp/gw/logs/gwctl.pid")
run() { # run <path>: prints "req/s gw-µs/req"
	local procs=("$master" $(pgrep -P "$master"))
	taskset -c 1 wrk -t 1 -c "$connections" -d "$warmup" "http://127.0.0.1:$data$1" >/dev/null
	local before after out
	before=$(cpu_ticks "${procs[@]}")
	out=$(taskset -c 1 wrk -t 1 -c "$connections" -d "$duration" "http://127.0.0.1:$data$1")
	after=$(cpu_ticks "${procs[@]}")
	awk -v r="$(awk '/requests in/ {print $1}' <<<"$out")" -v rps="$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
		-v t=$((after - before)) -v hz="$hz" 'BEGIN { printf "%.0f %.2f\n", rps, t / hz * 1e6 / r }'
}

declare -A results
scenarios=(/plain /logged)
for round in $(seq 1 "$rounds"); do
	n=${#scenarios[@]}
	for i in $(seq 0 $((n - 1))); do
		path=${scenarios[$(((i + round) % n))]}
		results[$path,$round]=$(run "$path")
	done
	echo "round $round: plain ${results[/plain,$round]} | logged ${results[/logged,$round]}" >&2
done

median() { sort -g | awk '{a[NR] = $1} END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
field() { for round in $(seq 1 "$rounds"); do awk -v n="$2" '{print $n}' <<<"${results[$1,$round]}"; done; }
ratio() {
	for round in $(seq 1 "$rounds"); do
		awk -v n="$2" -v a="${results[$1,$round]}" -v b="${results[/plain,$round]}" \
			'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.3f\n", x[n] / y[n] }'
	done
}
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }
echo
echo "http-logger on one gw worker (CPU 0); wrk -c $connections, upstream and collector on CPU 1;"
echo "median of $rounds rounds of $duration, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared, noisy machine: the ratios are the result)"
echo
printf '| route | req/s | × plain | gw CPU µs/req | × plain (range over rounds) |\n|---|---|---|---|---|\n'
for path in "${scenarios[@]}"; do
	printf '| %s | %s | %s | %s | %s (%s) |\n' "${path#/}" "$(field "$path" 1 | median)" "$(ratio "$path" 1 | median)" \
		"$(field "$path" 2 | median)" "$(ratio "$path" 2 | median)" "$(ratio "$path" 2 | range)"
done
