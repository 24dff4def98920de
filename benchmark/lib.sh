# Shell functions and values the side-by-side benchmark scripts (loggers.sh,
# opentelemetry.sh, redis.sh) share; each sources this file after cd-ing to the
# repository root.

# route_plugins <benchmark|bare> [member]: the members of a route's "plugins" object:
# the benchmark route's, the seeds' route 1 (limit-count with a count no run reaches, and
# prometheus, as APISIX's benchmark and benchmark/runner's routeBody), or none for bare;
# then member, one more plugin, when given.
route_plugins() {
	local base=''
	[ "$1" = benchmark ] && base='"limit-count":{"count":2000000000000,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}'
	if [ -n "$base" ] && [ -n "${2:-}" ]; then
		printf '%s,%s' "$base" "$2"
	else
		printf '%s' "$base${2:-}"
	fi
}

# port prints a free TCP port on 127.0.0.1.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# cpu_ticks <pid>...: user + system clock ticks of the processes (0 for one gone).
cpu_ticks() {
	local total=0 p
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		total=$((total + $(sed 's/^.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
	done
	echo "$total"
}

hz=$(getconf CLK_TCK)

# admin_key is the Admin API key of the gateways the scripts start (APISIX's default).
admin_key=edd1c9f034335f136f87ad84b625c8f1

# put_route <admin-port> <id> <uri> <plugins> <upstream host:port>: creates or replaces route
# <id>, <uri> proxied round-robin to the one node, with <plugins> the inside of the
# route's plugins object ('' for none); fails loudly on an Admin API error.
put_route() {
	curl -fsS -o /dev/null "http://127.0.0.1:$1/apisix/admin/routes/$2" -H "X-API-KEY: $admin_key" -X PUT \
		-d "{\"uri\":\"$3\",\"plugins\":{$4},\"upstream\":{\"type\":\"roundrobin\",\"nodes\":{\"$5\":1}}}"
}

# cpu_nanos <pid>...: the CPU time the processes' threads have had, in nanoseconds
# (schedstat's first field); /proc/<pid>/stat's clock ticks (10 ms) would be a 1% step on
# a 1 s run. A thread that exits in between takes its time with it: Go keeps its
# threads, and the callers check the count where it matters.
cpu_nanos() {
	local p files=()
	for p in "$@"; do files+=(/proc/"$p"/task/*/schedstat); done
	cat "${files[@]}" 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# stats [1]: the median of the numbers on stdin and its 95% interval, as
# benchmark/runner's medianInterval: the k-th smallest and k-th largest of n values, k the
# largest with P(Binomial(n, 1/2) < k) <= 2.5%; no interval for fewer than six values,
# nor with `stats 1`.
stats() {
	sort -g | awk -v median_only="${1:-0}" '{ a[NR] = $1 } END {
		n = NR; med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		k = 0; tail = 0; term = 0.5 ^ n
		while (k < n && tail + term <= 0.025) { tail += term; term *= (n - k) / (k + 1); k++ }
		if (k == 0 || median_only) printf "%.3f", med
		else printf "%.3f (95%% interval %.3f–%.3f)", med, a[k], a[n - k + 1]
	}'
}
