#!/bin/sh
# run.sh: a manual check of gw against APISIX Dashboard in headless Chromium. Too heavy for
# `make test` (an npm install of ~730 packages and a Vite build); see README.md here.
#
#   tools/dashboard-check/run.sh <apisix-dashboard source dir> [screenshot dir]
#
# Needs node >= 20, pnpm, Debian's chromium, and bin/gwctl (make build). Builds the dashboard
# if <source>/dist is missing, starts gw on loopback ports under a temporary prefix, serves
# the dashboard at /ui/ with /apisix/admin passed to gw (serve.mjs), runs check.mjs, and
# stops everything it started.
set -eu
dash=$(cd "$1" && pwd)
shots=${2:-$(mktemp -d /tmp/dashboard-shots.XXXXXX)}
mkdir -p "$shots"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
key=edd1c9f034335f136f87ad84b625c8f1 # the dashboard's own e2e key; loopback only
admin_port=${ADMIN_PORT:-19380} proxy_port=${PROXY_PORT:-19381} ui_port=${UI_PORT:-19390}

if [ ! -d "$dash/dist" ]; then
	# manage-package-manager-versions=false: use the installed pnpm rather than switching to
	# the exact version package.json pins.
	(cd "$dash" && CI=true pnpm --config.manage-package-manager-versions=false install --frozen-lockfile --ignore-scripts &&
		nice -n 10 node_modules/.bin/vite build)
fi
playwright=$(ls -d "$dash"/node_modules/.pnpm/playwright-core@*/node_modules | head -n 1)

prefix=$(mktemp -d /tmp/gw-dashboard.XXXXXX)
mkdir -p "$prefix/conf"
cat >"$prefix/conf/config.yaml" <<CONF
worker_processes: 1
node_listen: ["127.0.0.1:$proxy_port"]
admin:
  listen: 127.0.0.1:$admin_port
  keys: [{name: admin, key: $key, role: admin}]
prometheus:
  enabled: false
CONF
serve_pid=
cleanup() {
	[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
	"$repo/bin/gwctl" stop --prefix "$prefix" >/dev/null 2>&1 || true
	rm -rf "$prefix"
}
trap cleanup EXIT INT TERM
"$repo/bin/gwctl" start --prefix "$prefix"
node "$here/serve.mjs" "$dash/dist" "$ui_port" "127.0.0.1:$admin_port" &
serve_pid=$!
sleep 1
NODE_PATH=$playwright node "$here/check.mjs" "http://127.0.0.1:$ui_port/ui/" "127.0.0.1:$admin_port" \
	"127.0.0.1:$proxy_port" "$key" "$shots"
echo "screenshots in $shots"
