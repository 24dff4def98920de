#!/usr/bin/env bash
# Runs every fuzz target in the tree (func FuzzXxx in a _test.go file) for FUZZTIME each,
# one at a time, since go test fuzzes one target per run. Used by `make fuzz`.
#
# A target fails the run only when it really failed: a failing input written to
# testdata/fuzz (commit it with the fix, as a regression test), a panic, or an error the
# target reported. Go 1.26's fuzz coordinator can also end a duration-bounded run with a
# bare "context deadline exceeded" when a worker is still busy at the deadline on a loaded
# machine (go.dev/issue/75804, fixed in Go 1.27); such a run found nothing, so it is
# taken once more and, if it happens again, reported as a warning.
set -uo pipefail
fuzztime=${FUZZTIME:-30s}
go=${GO:-go}
flags=(-parallel 1 -fuzzminimizetime 10s)
cd "$(dirname "$0")/.."

failed=0
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | cut -c6-); do
		for attempt in 1 2; do
			echo "== $dir $target"
			out=$("$go" test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" "${flags[@]}" "$dir" 2>&1)
			status=$?
			echo "$out" | tail -n 3
			if [ $status -eq 0 ]; then
				break
			fi
			if grep -q 'context deadline exceeded' <<<"$out" &&
				! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' <<<"$out"; then
				echo "   (Go's fuzz deadline race, go.dev/issue/75804: nothing was found)"
				[ $attempt -eq 1 ] && continue
				echo "   warning: $target hit the deadline race twice; it found nothing"
				break
			fi
			echo "$out"
			failed=1
			break
		done
	done
done
exit $failed
