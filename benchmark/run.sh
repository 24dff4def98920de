#!/usr/bin/env bash
# Benchmarks gw against nginx on this machine: see benchmark/README.md.
#
#   benchmark/run.sh [--workers 1,2,4] [--duration 10s] [--connections 16] [--body 10]
#                    [--rounds 3] [--warmup 3s] [--retries 2] [--max-foreign 0.2]
#                    [--no-access-log] [--chain] [--ocelot] [--tls-handshake] [--h2] [--grpc]
#                    [--baseline REV] [--baseline-env 'NAME=VALUE ...']
#
# Results go to benchmark/results/ (latest.md, latest.json, latest-rps.png, latest-p99.png
# and dated copies). Run from anywhere; needs Go, wrk, nginx, taskset (ab for --ocelot and --tls-handshake, h2load for --h2).
set -euo pipefail

usage() {
	sed -n '4,7p' "$0" | sed 's/^# \{0,1\}//'
	exit "${1:-0}"
}

args=()
ocelot=0
h2=0
baseline=
while [ $# -gt 0 ]; do
	case "$1" in
	--workers | --duration | --connections | --body | --rounds | --warmup | --retries | --max-foreign)
		[ $# -ge 2 ] || { echo "run.sh: $1 needs a value" >&2; usage 2; }
		args+=("-${1#--}" "$2")
		shift 2
		;;
	--workers=* | --duration=* | --connections=* | --body=* | --rounds=* | --warmup=* | --retries=* | --max-foreign=*)
		args+=("-${1#--}")
		shift
		;;
	--no-access-log) args+=("-access-log=false"); shift ;;
	--chain) args+=("-chain"); shift ;;
	--ocelot) args+=("-ocelot"); ocelot=1; shift ;;
	--tls-handshake) args+=("-tls-handshake"); ocelot=1; shift ;;
	--h2) args+=("-h2"); h2=1; shift ;;
	--grpc) args+=("-grpc"); shift ;;
	# A second gw in the same rounds, built from REV (a commit, a branch) and/or with
	# NAME=VALUE in its environment (GOGC=25): with --ocelot or --tls-handshake, and in
	# the keep-alive sweep (a gw with no plugin, beside gw's; not with --h2 or --grpc).
	--baseline)
		[ $# -ge 2 ] || { echo "run.sh: $1 needs a revision" >&2; usage 2; }
		baseline=$2
		shift 2
		;;
	--baseline-env)
		[ $# -ge 2 ] || { echo "run.sh: $1 needs NAME=VALUE" >&2; usage 2; }
		args+=("-baseline-env" "$2")
		shift 2
		;;
	-h | --help) usage 0 ;;
	*) echo "run.sh: unknown argument $1" >&2; usage 2 ;;
	esac
done

cd "$(dirname "$0")/.."

# Prerequisites first, with the command that installs what is missing.
missing=()
packages=()
need() { # need <command> <debian package>
	if ! command -v "$1" >/dev/null 2>&1; then
		missing+=("$1")
		packages+=("$2")
	fi
}
need go golang
need wrk wrk
need nginx nginx-light
need taskset util-linux
[ "$ocelot" = 1 ] && need ab apache2-utils
[ "$h2" = 1 ] && need h2load nghttp2-client
if [ ${#missing[@]} -gt 0 ]; then
	echo "run.sh: missing ${missing[*]}. On Debian or Ubuntu install them with:" >&2
	echo "    sudo apt-get install -y ${packages[*]}" >&2
	echo "(Fedora: sudo dnf install -y wrk nginx httpd-tools util-linux; Go from https://go.dev/dl/)" >&2
	exit 1
fi

# ab -c 1000 and nginx/gw with 10620 connections per worker need many descriptors.
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge 20000 ]; then
	ulimit -n 20000
else
	ulimit -n "$hard"
	[ "$ocelot" = 1 ] && [ "$hard" -lt 2100 ] && echo "run.sh: open-file limit $hard is too low for ab -c 1000; raise it (ulimit -Hn)" >&2
fi

# Binaries go to a directory of the benchmark's own, so that a `make clean` or a rebuild
# of bin/ while the benchmark runs cannot swap or remove them.
bin=benchmark/results/tmp/bin
mkdir -p "$bin"
echo "building gwctl and the benchmark tools into $bin"
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
# As `make build` builds it, with its runtime changes (tools/runtime-overlay.sh).
overlay=$(tools/runtime-overlay.sh "$bin/goruntime")
go build $overlay -ldflags "-X main.version=$version" -o "$bin/gwctl" ./cmd/gwctl
go build -o "$bin/upstream" ./benchmark/upstream
go build -o "$bin/runner" ./benchmark/runner
go build -o "$bin/grpcload" ./benchmark/grpcload
if [ -n "$baseline" ]; then
	rev=$(git rev-parse --short "$baseline^{commit}")
	src=$(mktemp -d)
	trap 'rm -rf "$src"' EXIT
	echo "building the baseline, $rev, into $bin/gwctl-baseline"
	git archive "$rev" | tar -x -C "$src"
	abs_bin=$PWD/$bin
	abs_overlay=$(tools/runtime-overlay.sh "$abs_bin/goruntime")
	(cd "$src" && go build $abs_overlay -ldflags "-X main.version=$rev" -o "$abs_bin/gwctl-baseline" ./cmd/gwctl)
	rm -rf "$src"
	args+=("-baseline" "$bin/gwctl-baseline" "-baseline-name" "$rev")
fi
if [ "${GW_BENCH_PROFILE:-}" = 1 ]; then
	go build $overlay -o "$bin/profgw" ./benchmark/profgw
fi

exec "$bin/runner" -gwctl "$bin/gwctl" -upstream "$bin/upstream" -grpcload "$bin/grpcload" -profgw "$bin/profgw" "${args[@]}"
