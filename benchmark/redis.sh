#!/usr/bin/env bash
# limit-count's policies side by side on one gw worker: local (shared memory), redis (a
# call per key in flight, pipelined across connections) and redis with sync_interval.
#
#   benchmark/redis.sh [--duration 5s] [--rounds 5] [--connections 64] [--warmup 2s] [--keys N]
#
# Every request counts against one key (remote_addr: wrk's one address), so a worker's
# concurrent requests join into one Redis call; with --keys N they carry X-Client 1 to N
# in turn, counted by that header, so that concurrent requests rarely share a key and
# each is a call of its own.
#
# gw runs one worker pinned to CPU 0; wrk, the upstream and redis-server share CPU 1, so
# Redis's own work is taken from the load generator, never from gw. Each round measures
# the three routes of one gateway in an order rotated per round; the report gives the
# medians over rounds of req/s and gw's CPU µs per request (master + worker, from
# /proc/<pid>/stat), and each as a ratio to local's of the same round, and how busy gw's
# CPU was: well under 100%, req/s is the load CPU's limit, not gw's. The machine is
# shared: read the ratios, not the absolute figures. Needs Go, wrk, taskset, redis-server.
set -euo pipefail

duration=5s rounds=5 connections=64 warmup=2s keys=0
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--connections) connections=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--keys) keys=$2; shift 2 ;;
	-h | --help) sed -n '4,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "redis.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
for c in go wrk taskset redis-server; do
	command -v "$c" >/dev/null || { echo "redis.sh: needs $c (Debian: apt-get install -y wrk util-linux redis-server)" >&2; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "redis.sh: needs 2 CPUs, one for gw and one for the load" >&2; exit 1; }

cd "$(dirname "$0")/.."
tmp=benchmark/results/tmp/redis
rm -rf "$tmp" && mkdir -p "$tmp/bin" "$tmp/gw/conf" "$tmp/redis"
. benchmark/lib.sh
overlay=$(tools/runtime-overlay.sh "$tmp/bin/goruntime")
go build $overlay -o "$tmp/bin/gwctl" ./cmd/gwctl
go build -o "$tmp/bin/upstream" ./benchmark/upstream

data=$(port) admin=$(port) metrics=$(port) up=$(port) redis=$(port)
pids=()
cleanup() {
	"$tmp/bin/gwctl" stop --prefix "$tmp/gw" >/dev/null 2>&1 || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

taskset -c 1 "$tmp/bin/upstream" -listen "127.0.0.1:$up" >"$tmp/upstream.log" 2>&1 &
pids+=($!)
taskset -c 1 redis-server --port "$redis" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp/redis" >"$tmp/redis.log" 2>&1 &
redis_pid=$!
pids+=($redis_pid)
printf 'node_listen:\n  - "127.0.0.1:%s"\nadmin:\n  listen: "127.0.0.1:%s"\nprometheus:\n  export_addr: "127.0.0.1:%s"\n' \
	"$data" "$admin" "$metrics" >"$tmp/gw/conf/config.yaml"
taskset -c 0 "$tmp/bin/gwctl" start --workers 1 --prefix "$tmp/gw" >/dev/null
sleep 0.5

key=edd1c9f034335f136f87ad84b625c8f1
limit='"count": 2000000000000, "time_window": 60, "rejected_code": 503, "key": "remote_addr"'
wrk_script=()
if [ "$keys" -gt 0 ]; then
	limit='"count": 2000000000000, "time_window": 60, "rejected_code": 503, "key": "http_x_client"'
	cat >"$tmp/keys.lua" <<EOF
local n = 0
request = function()
	n = n % $keys + 1
	return wrk.format(nil, nil, {["X-Client"] = tostring(n)})
end
EOF
	wrk_script=(-s "$tmp/keys.lua")
fi
put() { # put <id> <uri> <limit-count fields>
	curl -fsS -o /dev/null "http://127.0.0.1:$admin/apisix/admin/routes/$1" -H "X-API-KEY: $key" -X PUT \
		-d "{\"uri\":\"$2\",\"plugins\":{\"limit-count\":{$limit$3}},\"upstream\":{\"type\":\"roundrobin\",\"nodes\":{\"127.0.0.1:$up\":1}}}"
}
put 1 /local ''
put 2 /redis ", \"policy\": \"redis\", \"redis_host\": \"127.0.0.1\", \"redis_port\": $redis"
put 3 /synced ", \"policy\": \"redis\", \"redis_host\": \"127.0.0.1\", \"redis_port\": $redis, \"sync_interval\": 0.5"
for path in /local /redis /synced; do
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$data$path")
	[ "$code" = 200 ] || { echo "redis.sh: $path answers $code" >&2; tail "$tmp/gw/logs/error.log" >&2; exit 1; }
done

master=$(cat "$tmp/gw/logs/gwctl.pid")
# cpu_ticks <pid>...: user + system clock ticks of the processes.
# redis_stat <name>: a counter of Redis's INFO stats.
redis_stat() { redis-cli -p "$redis" INFO stats | tr -d '\r' | awk -F: -v n="$1" '$1 == n {print $2}'; }
run() { # run <path>: prints "req/s gw-µs/req redis-µs/req commands-per-read non-2xx"
	local procs=("$master" $(pgrep -P "$master"))
	taskset -c 1 wrk -t 1 -c "$connections" -d "$warmup" "${wrk_script[@]}" "http://127.0.0.1:$data$1" >/dev/null
	local before redis_before out cmds_before reads_before
	cmds_before=$(redis_stat total_commands_processed) reads_before=$(redis_stat total_reads_processed)
	before=$(cpu_ticks "${procs[@]}") redis_before=$(cpu_ticks "$redis_pid")
	out=$(taskset -c 1 wrk -t 1 -c "$connections" -d "$duration" "${wrk_script[@]}" "http://127.0.0.1:$data$1")
	local after redis_after cmds reads
	after=$(cpu_ticks "${procs[@]}") redis_after=$(cpu_ticks "$redis_pid")
	cmds=$(($(redis_stat total_commands_processed) - cmds_before - 2)) reads=$(($(redis_stat total_reads_processed) - reads_before - 2))
	# A 500 is a count that waited past redis_timeout: counted and reported, not fatal.
	local failed
	failed=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
	local requests rps
	requests=$(awk '/requests in/ {print $1}' <<<"$out")
	rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
	awk -v r="$requests" -v rps="$rps" -v t=$((after - before)) -v rt=$((redis_after - redis_before)) -v hz="$hz" \
		-v c="$cmds" -v rd="$reads" -v f="${failed:-0}" \
		'BEGIN { printf "%.0f %.2f %.2f %.1f %d\n", rps, t / hz * 1e6 / r, rt / hz * 1e6 / r, (rd > 0 ? c / rd : 0), f }'
}

declare -A results
scenarios=(/local /redis /synced)
for round in $(seq 1 "$rounds"); do
	n=${#scenarios[@]}
	for i in $(seq 0 $((n - 1))); do
		path=${scenarios[$(((i + round) % n))]}
		results[$path,$round]=$(run "$path")
	done
	echo "round $round: local ${results[/local,$round]} | redis ${results[/redis,$round]} | synced ${results[/synced,$round]}" >&2
done

median() { sort -g | awk '{a[NR] = $1} END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
field() { # field <path> <n>: the n-th figure of every round
	for round in $(seq 1 "$rounds"); do awk -v n="$2" '{print $n}' <<<"${results[$1,$round]}"; done
}
ratio() { # ratio <path> <n>: per round, path's figure over local's
	for round in $(seq 1 "$rounds"); do
		awk -v n="$2" -v a="${results[$1,$round]}" -v b="${results[/local,$round]}" \
			'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.3f\n", x[n] / y[n] }'
	done
}
echo
keyed="one key"
[ "$keys" -gt 0 ] && keyed="$keys keys in turn"
echo "limit-count on one gw worker (CPU 0); wrk -c $connections, $keyed, upstream and redis-server on CPU 1;"
echo "median of $rounds rounds of $duration (shared, noisy machine: the ratios are the result)"
echo
printf '| policy | req/s | × local | gw CPU µs/req | × local | gw CPU busy | redis-server CPU µs/req | commands per read | non-2xx, all rounds |\n|---|---|---|---|---|---|---|---|---|\n'
for path in "${scenarios[@]}"; do
	name=${path#/}
	[ "$name" = synced ] && name="redis, sync_interval 0.5"
	busy=$(for round in $(seq 1 "$rounds"); do awk '{printf "%.0f\n", $1 * $2 / 1e4}' <<<"${results[$path,$round]}"; done | median)
	printf '| %s | %s | %s | %s | %s | %s%% | %s | %s | %s |\n' "$name" "$(field "$path" 1 | median)" "$(ratio "$path" 1 | median)" \
		"$(field "$path" 2 | median)" "$(ratio "$path" 2 | median)" "$busy" "$(field "$path" 3 | median)" "$(field "$path" 4 | median)" \
		"$(field "$path" 5 | awk '{s += $1} END {print s}')"
done
