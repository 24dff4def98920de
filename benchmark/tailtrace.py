#!/usr/bin/env python3
"""Usage: go tool trace -d=parsed worker-PID.trace | benchmark/tailtrace.py [--bins]

Reads a gw worker's execution trace (benchmark/tail.sh --trace) as `go tool trace` prints
it parsed, and prints what seed 001's tail is made of on the worker's side:
  - each connection's time in the worker (handed to a fasthttp goroutine until it waits
    for its next connection) and its wait on the network (the upstream's answer: from the
    goroutine's park until a poll made it runnable), by 50 ms of the run;
  - the collector's mark phases;
  - with --bins, per 10 ms: connections accepted, goroutines made runnable by the poller,
    and the most goroutines runnable at once. A poll takes at most 128 sockets: bins of
    exactly 128 wake-ups are the runtime's monitor polling every 10 ms.
"""
import collections
import re
import sys

EVENT = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+) ?(.*)$')
TRANSITION = re.compile(r'GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"')


def events(lines):
    """(time, kind, rest, stack function names) per event, the stack's first lines only."""
    cur = None
    for line in lines:
        if line.startswith('M='):
            if cur:
                yield cur
            m = EVENT.match(line)
            cur = (int(m.group(5)), m.group(4), m.group(6), []) if m else None
        elif cur and line.startswith('\t') and not line.startswith('\t\t'):
            cur[3].append(line.strip().split(' @ ')[0])
    if cur:
        yield cur


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else 0


def main():
    bins_wanted = '--bins' in sys.argv
    t0 = None
    handed, network_since = {}, {}
    residence, network = [], collections.defaultdict(list)
    gc, gc_open = [], None
    bins = collections.defaultdict(lambda: [0, 0, 0])
    runnable = 0
    for t, kind, rest, stack in sorted(events(sys.stdin), key=lambda e: e[0]):
        t0 = t if t0 is None else t0
        b = bins[int((t - t0) // 10e6)]
        if kind in ('RangeBegin', 'RangeEnd') and 'GC concurrent mark phase' in rest:
            if kind == 'RangeBegin':
                gc_open = t
            elif gc_open is not None:
                gc.append((gc_open, t))
                gc_open = None
        m = TRANSITION.match(rest) if kind == 'StateTransition' else None
        if not m:
            continue
        g, frm, to, reason = int(m.group(1)), m.group(2), m.group(3), m.group(4)
        in_accept = any('edgeListener' in f for f in stack)
        if frm == 'Running' and to != 'Running' and in_accept and not any('acceptRaw' in f for f in stack):
            b[0] += 1  # the accept loop's yield, once per accept
        if to == 'Runnable' and frm != 'Runnable':
            runnable += 1
        elif frm == 'Runnable' and to != 'Runnable':
            runnable = max(0, runnable - 1)
        b[2] = max(b[2], runnable)
        if to == 'Waiting' and reason == 'network' and not in_accept:
            network_since[g] = t
        elif frm == 'Waiting' and to == 'Runnable' and g in network_since:
            since = network_since.pop(g)
            network[int((since - t0) // 50e6)].append((t - since) / 1e6)
            b[1] += 1
        if to == 'Waiting' and reason == 'chan receive':
            if handed.get(g):
                residence.append((t - handed[g]) / 1e6)
            handed[g] = None
        elif frm == 'Waiting' and to == 'Runnable' and g in handed and handed[g] is None:
            handed[g] = t
    if t0 is None:
        sys.exit('tailtrace.py: no events on stdin')
    allnet = [x for xs in network.values() for x in xs]
    for name, xs in (('in the worker (handed to done)', residence), ('waiting on the network', allnet)):
        if xs:
            print('%-32s n %6d mean %6.2f p50 %6.2f p90 %6.2f p99 %6.2f max %6.2f ms' % (
                name, len(xs), sum(xs) / len(xs), pct(xs, .5), pct(xs, .9), pct(xs, .99), max(xs)))
    print('GC mark phases (ms into the trace + length):', ', '.join(
        '%.0f+%.1f' % ((a - t0) / 1e6, (c - a) / 1e6) for a, c in gc) or 'none')
    print('waiting on the network, by 50 ms of the trace (when the wait began):')
    for k in sorted(network):
        xs = network[k]
        if len(xs) >= 20:
            print('  %6d ms  n %5d  p50 %5.1f  p90 %5.1f  max %5.1f' % (k * 50, len(xs), pct(xs, .5), pct(xs, .9), max(xs)))
    if bins_wanted:
        print('per 10 ms: ms into the trace, accepts, network wake-ups, most runnable at once')
        for k in sorted(bins):
            a, w, r = bins[k]
            if a or w:
                print('  %6d %5d %5d %5d' % (k * 10, a, w, r))


if __name__ == '__main__':
    main()
