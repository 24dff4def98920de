# Shell functions the side-by-side benchmark scripts (loggers.sh, opentelemetry.sh,
# redis.sh) share; each sources this file after cd-ing to the repository root.

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
