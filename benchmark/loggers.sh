#!/usr/bin/env bash
# http-logger's cost on one gw worker: the same route with and without it, side by side.
#
#   benchmark/loggers.sh [--route benchmark|bare] [--duration 1s] [--rounds 31]
#                        [--connections 16] [--warmup 2s] [--rate N] [--baseline REV]
#                        [--profile DIR] [--profile-duration 15s] [--perf DIR] [--build-only]
#
# The route is the benchmark route, the seeds' route 1 (limit-count and prometheus, as
# APISIX's own benchmark runs it; benchmark/run.sh's gw+plugins), without http-logger and
# with it: the issue's measure. --route bare measures the same on a route with no plugin
# at all, where the logger pays alone for the plugin chain (its Ctx and phases) as well.
# The load is the benchmark's too: wrk with 16 connections, as APISIX's benchmark,
# benchmark/run.sh and opentelemetry.sh. The logger's share grows with the connections
# in flight, each with its own memory for the log phase to find out of the caches:
# --connections 64 measures it under that pressure.
#
# gw runs one worker pinned to CPU 0; wrk, the upstream and the collector (the upstream
# server again, which answers the POSTs) share CPU 1. The machine is shared, and what
# others run moves a run's figures by more than the 5% to be seen, slowly: so each round
# is four short runs close together, plain, logged, logged, plain (logged first in every
# other round), and its result is the logged route's CPU per request over the plain
# route's, each from its two runs together, which cancels a load that rises or falls
# steadily across the round. The CPU is the worker's alone (its threads'
# /proc/<pid>/task/*/schedstat, in nanoseconds; the batch processor's POSTs run in the
# worker and are in it), not clock ticks. The report gives the median over rounds of each
# figure and, for the ratio, its 95% interval (the order statistics a sign test puts
# around the median, as benchmark/runner does; from 6 rounds). Read the ratios, not the
# absolute figures.
#
# With --rate N, the load is h2load's at a fixed N requests a second (HTTP/1.1, the same
# connections) in place of wrk's as fast as it goes: with the load generator on a shared
# CPU, wrk's rate, and with it how many requests each of the worker's wake-ups serves,
# moves from run to run, and the worker's CPU per request with it; at a fixed rate both
# routes are measured at the same load. N must be below what the machine sustains (each
# run's achieved rate is checked).
#
# With --baseline REV, a second gateway built from that git revision (git archive, built
# outside the work tree) runs beside the first, also on CPU 0, and each round measures
# both builds, one after the other (the order swapped every round): the report adds, per
# round, this tree's ratio over the baseline's, with its interval.
#
# With --profile DIR, gw is benchmark/profgw instead, and after the rounds its worker
# profiles one more run of each route into DIR, logged.pprof and plain.pprof (go tool
# pprof, as printed). With --perf DIR, after the rounds `perf record -g` samples the
# worker, kernel included (loopback TCP, wake-ups, page faults: what pprof does not see),
# through two more runs of each route (logged, plain, plain, logged) into
# DIR/logged-1.perf, plain-1, plain-2 and logged-2 (perf report -i, as printed), and with
# --baseline the baseline's worker likewise, each run beside this tree's, into
# DIR/base-logged-1.perf and so on. --build-only builds and stops: run it first, outside the
# benchmark lock, and the measured run's builds are the Go build cache's. Needs Go, wrk,
# taskset, curl, git.
set -euo pipefail

route=benchmark duration=1s rounds=31 connections=16 warmup=2s rate='' baseline='' profile='' perf='' profile_duration=15s build_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	--route) route=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--connections) connections=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--baseline) baseline=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--profile) profile=$(realpath -m "$2"); shift 2 ;;
	--profile-duration) profile_duration=$2; shift 2 ;;
	--perf) perf=$(realpath -m "$2"); shift 2 ;;
	--build-only) build_only=1; shift ;;
	-h | --help) sed -n '4,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "loggers.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
case "$route" in
benchmark | bare) ;;
*) echo "loggers.sh: --route is benchmark or bare, not $route" >&2; exit 2 ;;
esac
for c in go wrk taskset curl git; do
	command -v "$c" >/dev/null || { echo "loggers.sh: needs $c (Debian: apt-get install -y wrk util-linux)" >&2; exit 1; }
done
[ -z "$rate" ] || command -v h2load >/dev/null || { echo "loggers.sh: --rate needs h2load (Debian: apt-get install -y nghttp2-client)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "loggers.sh: needs 2 CPUs, one for gw and one for the load" >&2; exit 1; }

cd "$(dirname "$0")/.."
tmp=benchmark/results/tmp/loggers
rm -rf "$tmp" && mkdir -p "$tmp/bin"
. benchmark/lib.sh
overlay=$(tools/runtime-overlay.sh "$tmp/bin/goruntime")
builds=(new)
declare -A bin label
bin[new]=$tmp/bin/gwctl label[new]="this tree ($(git describe --always --dirty))"
go build $overlay -o "${bin[new]}" ./cmd/gwctl
if [ -n "$profile" ]; then
	bin[new]=$tmp/bin/profgw
	go build $overlay -o "${bin[new]}" ./benchmark/profgw
	mkdir -p "$profile"
fi
if [ -n "$baseline" ]; then
	mkdir -p "$tmp/src"
	git archive "$baseline" | tar -x -C "$tmp/src"
	(cd "$tmp/src" && go build $(tools/runtime-overlay.sh "$PWD/../bin/goruntime-base") -o ../bin/gwctl-base ./cmd/gwctl)
	rm -rf "$tmp/src" # a second copy of the tree, which the tree's own tests would walk
	builds+=(base) bin[base]=$tmp/bin/gwctl-base label[base]="baseline $(git rev-parse --short "$baseline")"
fi
go build -o "$tmp/bin/upstream" ./benchmark/upstream
[ "$build_only" = 0 ] || exit 0

up=$(port)
pids=()
cleanup() {
	for b in "${builds[@]}"; do "$tmp/bin/gwctl" stop --prefix "$tmp/gw-$b" >/dev/null 2>&1 || true; done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT
taskset -c 1 "$tmp/bin/upstream" -listen "127.0.0.1:$up" >"$tmp/upstream.log" 2>&1 &
pids+=($!)

declare -A data worker
for b in "${builds[@]}"; do
	data[$b]=$(port) admin=$(port) metrics=$(port)
	mkdir -p "$tmp/gw-$b/conf"
	printf 'node_listen:\n  - "127.0.0.1:%s"\nadmin:\n  listen: "127.0.0.1:%s"\nprometheus:\n  export_addr: "127.0.0.1:%s"\n' \
		"${data[$b]}" "$admin" "$metrics" >"$tmp/gw-$b/conf/config.yaml"
	if [ -n "$profile" ] && [ "$b" = new ]; then
		# profgw stays attached; gwctl stop (cleanup) stops it by its pid file all the same.
		GW_BENCH_CPUPROFILE=$profile taskset -c 0 "${bin[$b]}" start --foreground --workers 1 --prefix "$tmp/gw-$b" >"$tmp/profgw.out" 2>&1 &
		pids+=($!)
		for _ in $(seq 100); do
			curl -s -o /dev/null "http://127.0.0.1:${data[$b]}/" && break
			sleep 0.1
		done
	else
		taskset -c 0 "${bin[$b]}" start --workers 1 --prefix "$tmp/gw-$b" >/dev/null
	fi
	sleep 0.5
	put_route "$admin" 1 /plain "$(route_plugins "$route")" "127.0.0.1:$up"
	put_route "$admin" 2 /logged "$(route_plugins "$route" "\"http-logger\":{\"uri\":\"http://127.0.0.1:$up/log\"}")" "127.0.0.1:$up"
	for path in /plain /logged; do
		code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${data[$b]}$path")
		[ "$code" = 200 ] || { echo "loggers.sh: $b $path answers $code" >&2; tail "$tmp/gw-$b/logs/error.log" >&2; exit 1; }
	done
	master=$(cat "$tmp/gw-$b/logs/gwctl.pid")
	worker[$b]=$(pgrep -P "$master")
	[ "$(wc -w <<<"${worker[$b]}")" = 1 ] || { echo "loggers.sh: $b: want one worker, found: ${worker[$b]}" >&2; exit 1; }
done

# worker_ns <build>: the CPU time the worker's threads have had, in nanoseconds
# (cpu_nanos); the thread count is checked after each run.
worker_ns() { cpu_nanos "${worker[$1]}"; }
threads() { ls /proc/"${worker[$1]}"/task | wc -l; }

load() { # load <build> <path> <duration>: prints "requests seconds"
	if [ -n "$rate" ]; then
		taskset -c 1 h2load --h1 -c "$connections" --rps "$(awk -v r="$rate" -v c="$connections" 'BEGIN { printf "%.3f", r / c }')" \
			-D "$3" "http://127.0.0.1:${data[$1]}$2" | awk '/^finished in/ {s = $3; sub(/s,$/, "", s)} /^requests:/ {n = $8} END {print n, s}'
		return
	fi
	taskset -c 1 wrk -t 1 -c "$connections" -d "$3" "http://127.0.0.1:${data[$1]}$2" |
		awk '/requests in/ {n = $1; s = $4; sub(/s,?$/, "", s)} END {print n, s}'
}

run() { # run <build> <path>: prints "requests seconds cpu-ns"
	local before after out n0
	n0=$(threads "$1")
	before=$(worker_ns "$1")
	out=$(load "$1" "$2" "$duration")
	after=$(worker_ns "$1")
	[ "$(threads "$1")" = "$n0" ] || echo "loggers.sh: the worker's thread count changed during a run: its CPU may be undercounted" >&2
	if [ -n "$rate" ] && awk -v r="$rate" -v out="$out" 'BEGIN { split(out, f); exit !(f[1] / f[2] < 0.95 * r) }'; then
		echo "loggers.sh: a run reached $(awk -v out="$out" 'BEGIN { split(out, f); printf "%.0f", f[1] / f[2] }') req/s of the $rate asked" >&2
	fi
	awk -v ns=$((after - before)) -v out="$out" 'BEGIN {split(out, f); printf "%d %s %.0f\n", f[1], f[2], ns}'
}

for b in "${builds[@]}"; do for path in /plain /logged; do load "$b" "$path" "$warmup" >/dev/null; done; done

# rows[build]: each round's "plain-requests plain-seconds plain-ns logged-requests
# logged-seconds logged-ns", a line a round.
declare -A rows
order_builds=("${builds[@]}")
for round in $(seq 1 "$rounds"); do
	if [ $((round % 2)) = 1 ]; then order=(/plain /logged /logged /plain); else order=(/logged /plain /plain /logged); fi
	line="round $round:"
	for b in "${order_builds[@]}"; do
		declare -A sum=([/plain]='0 0 0' [/logged]='0 0 0')
		for path in "${order[@]}"; do
			sum[$path]=$(awk -v a="${sum[$path]}" -v b="$(run "$b" "$path")" \
				'BEGIN { split(a, x); split(b, y); printf "%d %.3f %.0f\n", x[1] + y[1], x[2] + y[2], x[3] + y[3] }')
		done
		row="${sum[/plain]} ${sum[/logged]}"
		rows[$b]+="$row"$'\n'
		line+=$(awk -v b="$b" -v row="$row" 'BEGIN { split(row, f)
			printf " %s plain %.0f req/s %.2f µs/req, logged %.0f req/s %.2f µs/req, %.3f× |", b,
				f[1] / f[2], f[3] / f[1] / 1e3, f[4] / f[5], f[6] / f[4] / 1e3, (f[6] / f[4]) / (f[3] / f[1]) }')
		unset sum
	done
	echo "${line% |}" >&2
	order_builds=($(printf '%s\n' "${order_builds[@]}" | tac))
done

if [ -n "$profile" ]; then
	# Both routes, so that the logged route's profile can be read against the plain one's
	# (pprof -diff_base), each run's requests and CPU time beside it.
	for path in /logged /plain; do
		n0=$(worker_ns new)
		kill -USR2 "${worker[new]}"
		out=$(load new "$path" "$profile_duration")
		kill -USR2 "${worker[new]}"
		n1=$(worker_ns new)
		sleep 1
		mv "$profile/worker-${worker[new]}.pprof" "$profile/${path#/}.pprof"
		echo "${path#/}: $out s, $(awk -v ns=$((n1 - n0)) -v out="$out" 'BEGIN { split(out, f); printf "%.2f µs/req", ns / f[1] / 1e3 }')" >"$profile/${path#/}.txt"
	done
	echo "profiles: go tool pprof -top ${bin[new]} $profile/logged.pprof; what the logger adds:" \
		"go tool pprof -top -diff_base $profile/plain.pprof ${bin[new]} $profile/logged.pprof (requests and CPU in $profile/*.txt)" >&2
fi

if [ -n "$perf" ]; then
	command -v perf >/dev/null || { echo "loggers.sh: --perf needs perf (Debian: apt-get install -y linux-perf)" >&2; exit 1; }
	mkdir -p "$perf"
	# logged, plain, plain, logged, as the rounds: a load that moves steadily weighs on
	# both routes alike. Each route's two recordings are kept apart, -1 and -2, their
	# requests in the .txt beside them.
	# With --baseline, the baseline's worker is recorded the same way after each of this
	# tree's (base-logged-1.perf and so on; the order swapped every time), so that the two
	# builds' profiles come from the same minutes.
	i=0 perf_builds=("${builds[@]}")
	for path in /logged /plain /plain /logged; do
		i=$((i + 1)) name=${path#/}-$(((i == 1 || i == 2) ? 1 : 2))
		for b in "${perf_builds[@]}"; do
			file=$([ "$b" = new ] || echo "$b-")$name
			perf record -q -g -p "${worker[$b]}" -o "$perf/$file.perf" -- sleep "${profile_duration%s}" >/dev/null 2>&1 &
			recorder=$!
			out=$(load "$b" "$path" "$profile_duration")
			wait "$recorder" || true
			echo "$file: $out s" >"$perf/$file.txt"
		done
		perf_builds=($(printf '%s\n' "${perf_builds[@]}" | tac))
	done
	echo "perf: perf report --no-children --sort sym -i $perf/logged-1.perf (logged-2, plain-1, plain-2$([ -z "$baseline" ] || echo ', base-*'); requests in $perf/*.txt)" >&2
fi

column() { # column <build> <awk expression over a round's fields f[1..6]>
	printf '%s' "${rows[$1]}" | awk "{ split(\$0, f); printf \"%.4f\\n\", $2 }"
}
cpu_ratio='(f[6] / f[4]) / (f[3] / f[1])'
echo
echo "http-logger on the $route route ($([ "$route" = bare ] && echo 'no other plugin' || echo 'limit-count and prometheus')), one gw worker (CPU 0); $([ -n "$rate" ] && echo "h2load --h1 -c $connections at $rate req/s" || echo "wrk -c $connections"), upstream and collector on CPU 1;"
echo "$rounds rounds of 4 runs of $duration a build (plain, logged, logged, plain; the order reversed every other round);"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end (a shared, noisy machine: the ratio is the result)"
for b in "${builds[@]}"; do
	echo
	echo "${label[$b]}"
	echo
	printf '| route | req/s | worker CPU µs/req |\n|---|---|---|\n'
	printf '| plain | %.0f | %.2f |\n' "$(column "$b" 'f[1] / f[2]' | stats | cut -d' ' -f1)" "$(column "$b" 'f[3] / f[1] / 1e3' | stats | cut -d' ' -f1)"
	printf '| logged | %.0f | %.2f |\n' "$(column "$b" 'f[4] / f[5]' | stats | cut -d' ' -f1)" "$(column "$b" 'f[6] / f[4] / 1e3' | stats | cut -d' ' -f1)"
	echo
	echo "logged / plain, worker CPU per request: $(column "$b" "$cpu_ratio" | stats)×"
	echo "logged / plain, req/s: $(column "$b" '(f[4] / f[5]) / (f[1] / f[2])' | stats)×"
done
if [ -n "$baseline" ]; then
	echo
	echo "per round, this tree's CPU ratio over the baseline's: $(paste -d' ' <(column new "$cpu_ratio") <(column base "$cpu_ratio") | awk '{printf "%.4f\n", $1 / $2}' | stats)×"
fi
