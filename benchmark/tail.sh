#!/usr/bin/env bash
# Usage: benchmark/tail.sh [--rounds N] [--gw-env 'NAME=VALUE ...'] [--gwctl BIN] [--trace] [--out DIR]
#
# Seed 001's latency distribution, request by request, through gw and nginx side by side:
# what the p99 of `benchmark/run.sh --ocelot` consists of. One worker each on CPU 0, ab and
# the upstream on CPU 1, as run.sh pins them; a warm-up run each, then N rounds of
# `ab -r -n 20000 -c 1000 -g FILE` through each, alternating. For every run it prints the
# percentiles of ab's per-request times (ctime: connect(2) until ab wrote the request;
# wait: written until the first byte of the answer; ttime: the whole request) and keeps
# ab's files in DIR (default /tmp/gw-tail.XXXX).
#
# --gw-env sets gw's environment (its workers inherit it): GODEBUG=gctrace=1 writes a
# line per collection into DIR/gw/logs/error.log, each with its time since the worker's
# start, which tail.sh also reads from /proc so that a collection can be placed against
# ab's request start times (ab's -g file gives each request's start, in seconds).
# --trace runs gw as benchmark/profgw (built here with make build's runtime changes),
# takes a runtime/trace of the worker over gw's first measured run, into
# DIR/worker-<pid>.trace, and prints benchmark/tailtrace.py's summary of it (where a
# connection's time in the worker goes, by 50 ms of the run; benchmark/README.md).
#
# A diagnostic, not a benchmark: it takes the benchmark lock (/tmp/gw-bench.lock) itself
# for its runs, so run it without flock.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh

rounds=3
gw_env=""
gwctl=bin/gwctl
out=""
trace=0
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--gw-env) gw_env=$2; shift 2 ;;
	--gwctl) gwctl=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--trace) trace=1; shift ;;
	*) echo "tail.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -x "$gwctl" ] || { echo "tail.sh: no $gwctl; run make build" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/gw-tail.XXXX)
mkdir -p "$out"
out=$(cd "$out" && pwd)
gwctl=$(cd "$(dirname "$gwctl")" && pwd)/$(basename "$gwctl")

go build -o "$out/upstream" ./benchmark/upstream
up_port=$(port) gw_port=$(port) admin_port=$(port) metrics_port=$(port) nginx_port=$(port)

pids=()
cleanup() {
	[ "$trace" = 1 ] || "$gwctl" stop --prefix "$out/gw" >/dev/null 2>&1 || true
	[ -f "$out/nginx/nginx.pid" ] && kill "$(cat "$out/nginx/nginx.pid")" 2>/dev/null || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

taskset -c 1 "$out/upstream" -listen "127.0.0.1:$up_port" -body 10 >"$out/upstream.log" 2>&1 &
pids+=($!)

mkdir -p "$out/gw/conf"
cat >"$out/gw/conf/config.yaml" <<EOF
worker_processes: 1
node_listen:
  - "127.0.0.1:$gw_port"
admin:
  listen: "127.0.0.1:$admin_port"
prometheus:
  enabled: true
  export_addr: "127.0.0.1:$metrics_port"
access_log:
  enabled: true
  format: combined
  buffer: 64k
  flush_interval: 1s
worker_rlimit_nofile: 20480
EOF
if [ "$trace" = 1 ]; then
	go build $(tools/runtime-overlay.sh bin/goruntime) -o "$out/profgw" ./benchmark/profgw
	# shellcheck disable=SC2086 # gw_env is a list of NAME=VALUE words
	env $gw_env GW_BENCH_TRACE="$out" taskset -c 0 "$out/profgw" start --foreground --prefix "$out/gw" \
		--workers 1 >"$out/gw.out" 2>&1 &
	gw_master=$!
	pids+=("$gw_master")
	# Nothing waits for the workers here (as `gwctl start` does): wait for the data port.
	curl -sS -o /dev/null --retry 50 --retry-connrefused --retry-delay 0 "http://127.0.0.1:$gw_port/"
else
	# shellcheck disable=SC2086 # gw_env is a list of NAME=VALUE words
	env $gw_env taskset -c 0 "$gwctl" start --prefix "$out/gw" --workers 1 >/dev/null
	gw_master=$(cat "$out/gw/logs/gwctl.pid")
fi
curl -fsS -o /dev/null "http://127.0.0.1:$admin_port/apisix/admin/routes/1" -H "X-API-KEY: $admin_key" -X PUT \
	-d "{\"uri\":\"/api1/*\",\"plugins\":{\"proxy-rewrite\":{\"regex_uri\":[\"^/api1/(.*)\",\"/api/\$1\"]}},\"upstream\":{\"type\":\"roundrobin\",\"nodes\":{\"127.0.0.1:$up_port\":1}}}"

# The benchmark's nginx (benchmark/nginx/proxy.conf.tmpl with --ocelot's rewrite).
mkdir -p "$out/nginx"
cat >"$out/nginx/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile 20480;
pid $out/nginx/nginx.pid;
error_log $out/nginx/error.log warn;
daemon on;
events { worker_connections 10620; }
http {
    access_log $out/nginx/access.log combined buffer=64k flush=1s;
    client_body_temp_path $out/nginx/cb; proxy_temp_path $out/nginx/px;
    fastcgi_temp_path $out/nginx/fc; uwsgi_temp_path $out/nginx/uw; scgi_temp_path $out/nginx/sc;
    keepalive_timeout 60s;
    keepalive_requests 1000000;
    upstream backend { server 127.0.0.1:$up_port; keepalive 320; keepalive_timeout 60s; keepalive_requests 1000; }
    server {
        listen 127.0.0.1:$nginx_port backlog=4096 deferred;
        location /api1/ {
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$http_host;
            proxy_set_header X-Real-IP \$remote_addr;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto \$scheme;
            proxy_set_header X-Forwarded-Host \$host;
            proxy_set_header X-Forwarded-Port \$server_port;
            proxy_pass http://backend/api/;
        }
    }
}
EOF
taskset -c 0 nginx -c "$out/nginx/nginx.conf" -p "$out/nginx" 2>/dev/null
for p in $gw_port $nginx_port; do
	curl -fsS -o /dev/null --retry 20 --retry-connrefused --retry-delay 0 "http://127.0.0.1:$p/api1/values"
done

worker_pid() { pgrep -P "$gw_master" | head -1; }
# summary FILE: the percentiles of ab -g's ctime, wait and ttime columns (ms).
summary() {
	awk -F'\t' 'NR > 1 { print $3, $6, $5 }' "$1" | python3 -c '
import sys
rows = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(p * len(xs)))]
out = []
for i, name in enumerate(("ctime", "wait", "ttime")):
    xs = [r[i] for r in rows]
    out.append("%s p50 %4.0f p90 %4.0f p99 %4.0f max %5.0f" % (name, pct(xs, .5), pct(xs, .9), pct(xs, .99), max(xs)))
print("  " + " | ".join(out))
'
}

run() { # run NAME PORT ROUND
	local f="$out/$1-$3.tsv" before after
	before=$(cpu_ticks "$4")
	local tracing=0
	if [ "$trace" = 1 ] && [ "$1" = gw ] && [ "$3" = 1 ]; then tracing=1; kill -USR2 "$4"; fi
	flock /tmp/gw-bench.lock timeout 120 taskset -c 1 ab -r -n 20000 -c 1000 -g "$f" \
		"http://127.0.0.1:$2/api1/values" >"$out/$1-$3.ab" 2>&1
	after=$(cpu_ticks "$4")
	if [ "$tracing" = 1 ]; then kill -USR2 "$4"; sleep 1; fi
	printf '%-5s round %s: %s, p99 %s ms, %s µs/req, load %s\n' "$1" "$3" \
		"$(awk '/^Requests per second/ { print $4 " req/s" }' "$out/$1-$3.ab")" \
		"$(awk '$1 == "99%" { print $2 }' "$out/$1-$3.ab")" \
		"$(( (after - before) * 1000000 / hz / 20000 ))" "$(cut -d' ' -f1 /proc/loadavg)"
	summary "$f"
}

gw_worker=$(worker_pid)
nginx_worker=$(pgrep -P "$(cat "$out/nginx/nginx.pid")" | head -1)
echo "gw worker $gw_worker, nginx worker $nginx_worker; files in $out"
run gw "$gw_port" warmup "$gw_worker" >/dev/null
run nginx "$nginx_port" warmup "$nginx_worker" >/dev/null
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) = 1 ]; then
		run gw "$gw_port" "$r" "$gw_worker"; run nginx "$nginx_port" "$r" "$nginx_worker"
	else
		run nginx "$nginx_port" "$r" "$nginx_worker"; run gw "$gw_port" "$r" "$gw_worker"
	fi
done
echo "worker start (s since boot): $(awk -v hz="$hz" '{ print $22 / hz }' "/proc/$gw_worker/stat")"
if [ "$trace" = 1 ]; then
	go tool trace -d=parsed "$out/worker-$gw_worker.trace" >"$out/trace.txt"
	python3 benchmark/tailtrace.py --bins <"$out/trace.txt" >"$out/trace-summary.txt"
	sed '/^per 10 ms/,$d' "$out/trace-summary.txt"
	echo "per 10 ms of the trace: $out/trace-summary.txt"
fi
