#!/usr/bin/env bash
# opentelemetry's cost on one gw worker: the benchmark route with the plugin (always_on,
# every request a span sent to a collector; and always_off, which only propagates)
# against the same route without it.
#
#   benchmark/opentelemetry.sh [--duration 5s] [--rounds 5] [--connections 16] [--warmup 2s]
#
# gw runs one worker pinned to CPU 0; wrk and the upstream, which is also the OTLP
# collector (it answers the POSTs to /v1/traces with 200), share CPU 1. Each round
# measures the three routes of one gateway in an order rotated per round. The report gives,
# over rounds, the median of req/s and of gw's CPU µs per request (master + worker, from
# /proc/<pid>/stat, the exporter goroutine included), the ratio traced/plain per round
# (median, lowest and highest), and the spans exported and dropped. The machine is
# shared: read the ratios, not the absolute figures. Needs Go, wrk, taskset.
set -euo pipefail

duration=5s rounds=5 connections=16 warmup=2s
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--connections) connections=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	-h | --help) sed -n '5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "opentelemetry.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
for c in go wrk taskset curl; do
	command -v "$c" >/dev/null || { echo "opentelemetry.sh: needs $c (Debian: apt-get install -y wrk util-linux curl)" >&2; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "opentelemetry.sh: needs 2 CPUs, one for gw and one for the load" >&2; exit 1; }

cd "$(dirname "$0")/.."
tmp=benchmark/results/tmp/opentelemetry
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
cat >"$tmp/gw/conf/config.yaml" <<YAML
node_listen:
  - "127.0.0.1:$data"
admin:
  listen: "127.0.0.1:$admin"
prometheus:
  export_addr: "127.0.0.1:$metrics"
plugin_attr:
  opentelemetry:
    collector: {address: "127.0.0.1:$up"}
YAML
taskset -c 0 "$tmp/bin/gwctl" start --workers 1 --prefix "$tmp/gw" >/dev/null
sleep 0.5

key=edd1c9f034335f136f87ad84b625c8f1
put() { # put <id> <uri> <plugins>
	curl -fsS -o /dev/null "http://127.0.0.1:$admin/apisix/admin/routes/$1" -H "X-API-KEY: $key" -X PUT \
		-d "{\"uri\":\"$2\",\"plugins\":{$3},\"upstream\":{\"type\":\"roundrobin\",\"nodes\":{\"127.0.0.1:$up\":1}}}"
}
put 1 /plain ''
put 2 /traced '"opentelemetry":{"sampler":{"name":"always_on"}}'
put 3 /unsampled '"opentelemetry":{"sampler":{"name":"always_off"}}'
for path in /plain /traced /unsampled; do
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$data$path")
	[ "$code" = 200 ] || { echo "opentelemetry.sh: $path answers $code" >&2; tail "$tmp/gw/logs/error.log" >&2; exit 1; }
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
scenarios=(/plain /traced /unsampled)
for round in $(seq 1 "$rounds"); do
	for i in 0 1 2; do
		path=${scenarios[$(((i + round) % 3))]}
		results[$path,$round]=$(run "$path")
	done
	echo "round $round: plain ${results[/plain,$round]} | traced ${results[/traced,$round]} | unsampled ${results[/unsampled,$round]}" >&2
done

median() { sort -g | awk '{a[NR] = $1} END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
field() { for round in $(seq 1 "$rounds"); do awk -v n="$2" '{print $n}' <<<"${results[$1,$round]}"; done; }
ratios() { # ratios <path> <n>: per round, path's figure over plain's
	for round in $(seq 1 "$rounds"); do
		awk -v n="$2" -v a="${results[$1,$round]}" -v b="${results[/plain,$round]}" \
			'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.3f\n", x[n] / y[n] }'
	done
}
spans=$(curl -s "http://127.0.0.1:$metrics/apisix/prometheus/metrics" | awk -F'[" ]' '/^gw_opentelemetry_spans_total/ {printf "%s %s, ", $2, $NF}')
echo
echo "opentelemetry (always_on) on one gw worker (CPU 0); wrk -c $connections and the upstream/collector on CPU 1;"
echo "median of $rounds rounds of $duration; load average $(cut -d' ' -f1-3 /proc/loadavg) (shared, noisy machine: the ratios are the result)"
echo
printf '| route | req/s | gw CPU µs/req |\n|---|---|---|\n'
for path in "${scenarios[@]}"; do
	printf '| %s | %s | %s |\n' "${path#/}" "$(field "$path" 1 | median)" "$(field "$path" 2 | median)"
done
echo
for path in /traced /unsampled; do
	printf '%s/plain CPU µs per request: median %s (lowest %s, highest %s); req/s: median %s\n' "${path#/}" \
		"$(ratios $path 2 | median)" "$(ratios $path 2 | sort -g | head -1)" "$(ratios $path 2 | sort -g | tail -1)" "$(ratios $path 1 | median)"
done
echo "spans: ${spans%, }"
