#!/usr/bin/env bash
# opentelemetry's cost on one gw worker: the benchmark route with the plugin (always_on,
# every request a span sent to a collector; and always_off, which only propagates)
# against the same route without it; with --baseline, the same for a second build of gw
# (a git revision), side by side in the same rounds.
#
#   benchmark/opentelemetry.sh [--route benchmark|bare] [--rounds 31] [--duration 1s]
#                              [--connections 16] [--warmup 2s] [--baseline REV]
#                              [--routes plain,traced,unsampled] [--concurrent]
#
# The benchmark route is the seeds' route 1 (limit-count and prometheus, as APISIX's own
# benchmark runs it; benchmark/run.sh's gw+plugins), which every route here carries, the
# plugin added on the traced and unsampled ones: the issue's measure. --route bare has
# no other plugin, so that the plugin pays alone for the plugin chain as well.
#
# gw runs one worker pinned to CPU 0; wrk and the upstream, which is also the OTLP
# collector (it answers the POSTs to /v1/traces with 200), share CPU 1. A round runs wrk
# once on each route (of each build), back to back, in an order rotated per round, so that
# the load others put on the machine, which drifts over seconds, weighs on every route of
# a round alike: the route's figure over the plain route's in the same round is the
# result, and short runs in many rounds pair the routes tighter than long runs in few.
# gw's CPU is the master's and the worker's, every thread (the exporter goroutine
# included), read in nanoseconds from /proc/<pid>/task/*/schedstat; /proc/<pid>/stat's
# clock ticks (10 ms) would be a 1% step on a 1 s run. The report gives the medians over
# rounds of req/s and CPU µs per request, and of the per-round ratios to the plain route
# with the 95% interval of each median (benchmark/runner's: the order statistics a sign
# test puts around the median; six rounds at least), and the spans exported and dropped.
# With --baseline, each build's ratio, and per round the working tree's traced/plain ratio
# over the baseline's. With --concurrent each route runs at the same time as the plain
# route, on two gateways of the build (both on CPU 0; two wrk on CPU 1), which swap sides
# every round: a burst of others' load falls on both runs of a pair alike, where back to
# back it falls on one. The machine is shared: read the ratios, not the absolute figures.
# Needs Go, wrk, taskset, curl, git.
set -euo pipefail

route=benchmark duration=1s rounds=31 connections=16 warmup=2s baseline= routes=plain,traced,unsampled concurrent=0
while [ $# -gt 0 ]; do
	case "$1" in
	--route) route=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--connections) connections=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--baseline) baseline=$2; shift 2 ;;
	--routes) routes=$2; shift 2 ;;
	--concurrent) concurrent=1; shift ;;
	-h | --help) sed -n '7,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "opentelemetry.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
case "$route" in
benchmark | bare) ;;
*) echo "opentelemetry.sh: --route is benchmark or bare, not $route" >&2; exit 2 ;;
esac
for c in go wrk taskset curl git; do
	command -v "$c" >/dev/null || { echo "opentelemetry.sh: needs $c (Debian: apt-get install -y wrk util-linux curl git)" >&2; exit 1; }
done
scenarios=(/plain) # always: the ratios' denominator
for r in ${routes//,/ }; do
	case "$r" in
	plain) ;;
	traced | unsampled) [[ " ${scenarios[*]} " = *" /$r "* ]] || scenarios+=("/$r") ;;
	*) echo "opentelemetry.sh: --routes: unknown route $r (plain, traced, unsampled)" >&2; exit 2 ;;
	esac
done
[ "$(nproc)" -ge 2 ] || { echo "opentelemetry.sh: needs 2 CPUs, one for gw and one for the load" >&2; exit 1; }

cd "$(dirname "$0")/.."
tmp=benchmark/results/tmp/opentelemetry
rm -rf "$tmp" && mkdir -p "$tmp/bin"
. benchmark/lib.sh
overlay=$(tools/runtime-overlay.sh "$tmp/bin/goruntime")
builds=(new)
declare -A label
label[new]="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo +changes)"
go build $overlay -o "$tmp/bin/gwctl-new" ./cmd/gwctl
if [ -n "$baseline" ]; then
	# The baseline's tree from git, built outside the work tree: no checkout, no worktree.
	mkdir -p "$tmp/src"
	git archive "$baseline" | tar -x -C "$tmp/src"
	(cd "$tmp/src" && go build $overlay -o "../bin/gwctl-base" ./cmd/gwctl)
	rm -rf "$tmp/src" # a second copy of the tree, which the tree's own tests would walk
	builds+=(base)
	label[base]="$(git rev-parse --short "$baseline")"
fi
go build -o "$tmp/bin/upstream" ./benchmark/upstream

up=$(port)
pids=()
# A gateway per build, or with --concurrent two ("new" and "new.2"), the two sides of a pair.
instances=()
for b in "${builds[@]}"; do
	instances+=("$b")
	[ "$concurrent" = 1 ] && instances+=("$b.2")
done
cleanup() {
	for i in "${instances[@]}"; do "$tmp/bin/gwctl-${i%.2}" stop --prefix "$tmp/gw-$i" >/dev/null 2>&1 || true; done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

taskset -c 1 "$tmp/bin/upstream" -listen "127.0.0.1:$up" >"$tmp/upstream.log" 2>&1 &
pids+=($!)

declare -A data metrics master
for b in "${instances[@]}"; do
	data[$b]=$(port) metrics[$b]=$(port)
	admin=$(port)
	mkdir -p "$tmp/gw-$b/conf"
	cat >"$tmp/gw-$b/conf/config.yaml" <<YAML
node_listen:
  - "127.0.0.1:${data[$b]}"
admin:
  listen: "127.0.0.1:$admin"
prometheus:
  export_addr: "127.0.0.1:${metrics[$b]}"
plugin_attr:
  opentelemetry:
    collector: {address: "127.0.0.1:$up"}
YAML
	taskset -c 0 "$tmp/bin/gwctl-${b%.2}" start --workers 1 --prefix "$tmp/gw-$b" >/dev/null
	sleep 0.5
	put_route "$admin" 1 /plain "$(route_plugins "$route")" "127.0.0.1:$up"
	put_route "$admin" 2 /traced "$(route_plugins "$route" '"opentelemetry":{"sampler":{"name":"always_on"}}')" "127.0.0.1:$up"
	put_route "$admin" 3 /unsampled "$(route_plugins "$route" '"opentelemetry":{"sampler":{"name":"always_off"}}')" "127.0.0.1:$up"
	for path in /plain /traced /unsampled; do
		code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${data[$b]}$path")
		[ "$code" = 200 ] || { echo "opentelemetry.sh: $b $path answers $code" >&2; tail "$tmp/gw-$b/logs/error.log" >&2; exit 1; }
	done
	master[$b]=$(cat "$tmp/gw-$b/logs/gwctl.pid")
done

# wrk_run <build> <path> <duration>: prints "req/s gw-µs/req".
wrk_run() {
	local procs=("${master[$1]}" $(pgrep -P "${master[$1]}"))
	local before after out
	before=$(cpu_nanos "${procs[@]}")
	out=$(taskset -c 1 wrk -t 1 -c "$connections" -d "$3" "http://127.0.0.1:${data[$1]}$2")
	after=$(cpu_nanos "${procs[@]}")
	awk -v r="$(awk '/requests in/ {print $1}' <<<"$out")" -v rps="$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
		-v t=$((after - before)) 'BEGIN { printf "%.0f %.3f\n", rps, t / 1e3 / r }'
}

# wrk_pair <instance> <path> <instance> <path> <duration>: two runs at once, on two
# gateways; prints "req/s gw-µs/req req/s gw-µs/req".
wrk_pair() {
	local procs1=("${master[$1]}" $(pgrep -P "${master[$1]}")) procs2=("${master[$3]}" $(pgrep -P "${master[$3]}"))
	local before1 before2 after1 after2 out1 out2 w1 w2
	before1=$(cpu_nanos "${procs1[@]}") before2=$(cpu_nanos "${procs2[@]}")
	taskset -c 1 wrk -t 1 -c "$connections" -d "$5" "http://127.0.0.1:${data[$1]}$2" >"$tmp/wrk1.out" &
	w1=$!
	taskset -c 1 wrk -t 1 -c "$connections" -d "$5" "http://127.0.0.1:${data[$3]}$4" >"$tmp/wrk2.out" &
	w2=$!
	wait "$w1" "$w2"
	after1=$(cpu_nanos "${procs1[@]}") after2=$(cpu_nanos "${procs2[@]}")
	out1=$(<"$tmp/wrk1.out") out2=$(<"$tmp/wrk2.out")
	awk -v r1="$(awk '/requests in/ {print $1}' <<<"$out1")" -v rps1="$(awk '/Requests\/sec/ {print $2}' <<<"$out1")" \
		-v r2="$(awk '/requests in/ {print $1}' <<<"$out2")" -v rps2="$(awk '/Requests\/sec/ {print $2}' <<<"$out2")" \
		-v t1=$((after1 - before1)) -v t2=$((after2 - before2)) \
		'BEGIN { printf "%.0f %.3f %.0f %.3f\n", rps1, t1 / 1e3 / r1, rps2, t2 / 1e3 / r2 }'
}

# Every route of every gateway once at length first: connections, buffers and the
# exporter's goroutine in place before anything is measured.
runs=()
for b in "${builds[@]}"; do for path in "${scenarios[@]}"; do runs+=("$b $path"); done; done
for i in "${instances[@]}"; do for path in "${scenarios[@]}"; do wrk_run "$i" "$path" "$warmup" >/dev/null; done; done

# plain_of <path>: the key of the plain run a route's run is compared with: the round's
# plain run, or with --concurrent the plain run beside it.
plain_of() { if [ "$concurrent" = 1 ]; then echo "/plain@$1"; else echo /plain; fi; }

declare -A results
if [ "$concurrent" = 0 ]; then
	units=("${runs[@]}")
else
	# A unit is a route and the plain route at once, on the build's two gateways, which
	# swap sides every round.
	units=()
	for b in "${builds[@]}"; do for path in "${scenarios[@]:1}"; do units+=("$b $path"); done; done
fi
n=${#units[@]}
for round in $(seq 1 "$rounds"); do
	for i in $(seq 0 $((n - 1))); do
		r=${units[$(((i + round) % n))]}
		b=${r% *} path=${r#* }
		if [ "$concurrent" = 0 ]; then
			results[$r,$round]=$(wrk_run "$b" "$path" "$duration")
			continue
		fi
		one=$b two=$b.2
		[ $((round % 2)) = 0 ] && one=$b.2 two=$b
		pair=$(wrk_pair "$one" /plain "$two" "$path" "$duration")
		results[$b /plain@$path,$round]=$(cut -d' ' -f1,2 <<<"$pair")
		results[$r,$round]=$(cut -d' ' -f3,4 <<<"$pair")
	done
	line="round $round:"
	for r in "${units[@]}"; do
		[ "$concurrent" = 1 ] && line+=" ${r% *}/plain ${results[${r% *} /plain@${r#* },$round]} beside"
		line+=" ${r/ \//\/} ${results[$r,$round]} |"
	done
	echo "${line% |}" >&2
done

field() { # field <build> <path> <n>: the n-th figure of every round
	for round in $(seq 1 "$rounds"); do awk -v n="$3" '{print $n}' <<<"${results[$1 $2,$round]}"; done
}
ratios() { # ratios <build> <path> <n>: per round, the route's n-th figure over the plain route's
	local plain
	plain=$(plain_of "$2")
	for round in $(seq 1 "$rounds"); do
		awk -v n="$3" -v a="${results[$1 $2,$round]}" -v b="${results[$1 $plain,$round]}" \
			'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.4f\n", x[n] / y[n] }'
	done
}
spans() {
	curl -s "http://127.0.0.1:${metrics[$1]}/apisix/prometheus/metrics" |
		awk -F'[" ]' '/^gw_opentelemetry_spans_total/ {printf "%s %s, ", $2, $NF}' | sed 's/, $//'
}

echo
if [ "$concurrent" = 1 ]; then
	echo "opentelemetry: two gateways of one worker each on CPU 0, each route run at the same time as the plain route on the other"
	echo "(the two swap every round); two wrk -c $connections and the upstream/collector on CPU 1;"
else
	echo "opentelemetry on the $route route ($([ "$route" = bare ] && echo 'no other plugin' || echo 'limit-count and prometheus')), one gw worker (CPU 0); wrk -c $connections and the upstream/collector on CPU 1;"
fi
echo "$rounds rounds of $duration per route; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end (shared, noisy machine: the ratios are the result)"
for b in "${builds[@]}"; do
	echo
	echo "build ${label[$b]}$([ "$b" = base ] && echo ' (baseline)')"
	echo
	printf '| route | req/s | gw CPU µs/req | CPU µs/req ÷ plain | req/s ÷ plain |\n|---|---|---|---|---|\n'
	for path in "${scenarios[@]}"; do
		cpu=- rps=-
		if [ "$path" != /plain ]; then cpu=$(ratios "$b" "$path" 2 | stats) rps=$(ratios "$b" "$path" 1 | stats); fi
		key=$path
		[ "$path" = /plain ] && [ "$concurrent" = 1 ] && key=$(plain_of "${scenarios[1]}")
		printf '| %s | %.0f | %.2f | %s | %s |\n' "${path#/}" "$(field "$b" "$key" 1 | stats 1)" "$(field "$b" "$key" 2 | stats 1)" "$cpu" "$rps"
	done
	echo
	echo "spans: $(spans "$b")$([ "$concurrent" = 1 ] && echo "; its second gateway: $(spans "$b.2")")"
done
if [ -n "$baseline" ]; then
	echo
	for path in "${scenarios[@]:1}"; do
		printf '%s: per round, %s'"'"'s CPU ratio over %s'"'"'s: %s\n' "${path#/}" "${label[new]}" "${label[base]}" "$(
			for round in $(seq 1 "$rounds"); do
				plain=$(plain_of "$path")
				awk -v a="${results[new $path,$round]}" -v b="${results[new $plain,$round]}" \
					-v c="${results[base $path,$round]}" -v d="${results[base $plain,$round]}" \
					'BEGIN { split(a, w, " "); split(b, x, " "); split(c, y, " "); split(d, z, " "); printf "%.4f\n", (w[2] / x[2]) / (y[2] / z[2]) }'
			done | stats
		)"
	done
fi
