// Command profgw is gwctl's master and worker with a CPU profiler bolted on, for the
// benchmark's profiling pass only; gw itself carries no profiling hook. It understands just
// the two verbs the benchmark needs: `start --foreground --prefix DIR --workers N` runs the
// master, which re-executes this binary as its workers, and `worker ...` (as the master
// calls it) runs one worker. A worker started with GW_BENCH_CPUPROFILE=DIR in its
// environment profiles itself between two SIGUSR2s, into DIR/worker-<pid>.pprof, so the
// runner can profile exactly the measured window. With GW_BENCH_TRACE=DIR instead, the two
// SIGUSR2s start and stop a runtime/trace (execution trace) into DIR/worker-<pid>.trace:
// the scheduler's and the collector's view of the same window (benchmark/tail.sh).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"gw/internal/errlog"
	"gw/master"
	_ "gw/plugins/all"
	"gw/shm"
	"gw/worker"
)

// version must match between master and workers; both are this binary.
const version = "profgw"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: profgw start --foreground --prefix DIR [--workers N] | profgw worker ...")
		os.Exit(2)
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	prefix := flags.String("prefix", ".", "instance directory")
	workers := flags.Int("workers", 0, "worker processes")
	flags.Bool("foreground", true, "accepted for gwctl compatibility; profgw never daemonizes")
	slot := flags.Int("slot", 0, "worker slot (set by the master)")
	generation := flags.Uint64("generation", 0, "worker generation (set by the master)")
	_ = flags.Parse(os.Args[2:])
	abs, err := filepath.Abs(*prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switch os.Args[1] {
	case "start":
		err = master.Run(master.Options{Prefix: abs, Workers: *workers, Version: version, Stderr: os.Stderr,
			NewChecker: func(segments map[string]*shm.Segment, log *errlog.Logger) master.SnapshotChecker {
				return worker.NewChecker(segments, log)
			}})
	case "worker":
		if dir := os.Getenv("GW_BENCH_CPUPROFILE"); dir != "" {
			go profileOnSignal(dir, "pprof", pprof.StartCPUProfile, pprof.StopCPUProfile)
		} else if dir := os.Getenv("GW_BENCH_TRACE"); dir != "" {
			go profileOnSignal(dir, "trace", trace.Start, trace.Stop)
		}
		err = worker.Run(worker.Options{Prefix: abs, Slot: *slot, Generation: *generation, Version: version})
	default:
		err = fmt.Errorf("unknown verb %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "profgw %s: %v\n", os.Args[1], err)
		os.Exit(worker.ExitCode(err))
	}
}

// profileOnSignal starts a CPU profile or an execution trace (start) at the first SIGUSR2
// and writes it (stop) at the second, into DIR/worker-<pid>.<ext>.
func profileOnSignal(dir, ext string, start func(io.Writer) error, stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	path := filepath.Join(dir, fmt.Sprintf("worker-%d.%s", os.Getpid(), ext))
	for range sig {
		f, err := os.Create(path)
		if err == nil {
			err = start(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "profgw: %s: %v\n", ext, err)
			return
		}
		<-sig
		stop()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "profgw: %s: %v\n", ext, err)
		}
	}
}
