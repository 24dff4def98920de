package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"gw/conf"
	"gw/internal/confio"
	"gw/internal/errlog"
	"gw/master"
	"gw/shm"
	"gw/worker"
)

// prefixFlag is accepted after every verb too (`gwctl stop --prefix DIR`).
func prefixFlag() cli.Flag {
	return &cli.StringFlag{Name: "prefix", Aliases: []string{"p"}, Usage: "instance directory (default: the current directory)"}
}

func instancePaths(c *cli.Context) (master.Paths, error) {
	prefix := c.String("prefix")
	if prefix == "" {
		for _, ancestor := range c.Lineage() {
			if p := ancestor.String("prefix"); p != "" {
				prefix = p
				break
			}
		}
	}
	if prefix == "" {
		prefix = "."
	}
	return master.PathsFor(prefix)
}

func startCommand() *cli.Command {
	return &cli.Command{
		Name:  "start",
		Usage: "start the master and its workers; returns once every worker serves",
		Flags: []cli.Flag{
			prefixFlag(),
			&cli.IntFlag{Name: "workers", Aliases: []string{"w"}, Usage: "run `N` worker processes, overriding worker_processes for this master's life", DefaultText: "worker_processes from conf/config.yaml"},
			&cli.BoolFlag{Name: "foreground", Usage: "keep the master attached (systemd, containers)"},
			&cli.IntFlag{Name: "notify-fd", Hidden: true, Usage: "pipe to the daemonizing parent"},
			&cli.StringFlag{Name: "binary", Hidden: true, Usage: "path of gwctl on disk, started again by an upgrade"},
			&cli.BoolFlag{Name: "no-stderr", Hidden: true, Usage: "do not copy the error log to stderr"},
			&cli.DurationFlag{Name: "upgrade-timeout", Value: time.Minute, Usage: "how long a new binary may take to become ready in an upgrade (gwctl upgrade)"},
		},
		Action: func(c *cli.Context) error {
			paths, err := instancePaths(c)
			if err != nil {
				return err
			}
			if c.Int("workers") < 0 {
				return fmt.Errorf("--workers: must be a positive number, got %d", c.Int("workers"))
			}
			if c.Bool("foreground") {
				if err := master.ReexecUnderTitle(); err != nil {
					return err
				}
				opts := master.Options{
					Prefix: paths.Prefix, Workers: c.Int("workers"), Version: version,
					Binary: c.String("binary"), UpgradeTimeout: c.Duration("upgrade-timeout"),
					NewChecker: newChecker,
				}
				if fd := c.Int("notify-fd"); fd > 0 {
					opts.Notify = master.NotifyPipe(fd)
				} else if !c.Bool("no-stderr") {
					opts.Stderr = os.Stderr
				}
				return master.Run(opts)
			}
			started, err := master.Daemonize(paths, master.DaemonOptions{Workers: c.Int("workers"), UpgradeTimeout: c.Duration("upgrade-timeout")})
			if err != nil {
				return err
			}
			fmt.Println(master.StartedLine(started.Summary))
			if started.LeftOut > 0 {
				fmt.Println(master.LeftOutWarning(started.LeftOut))
			}
			return nil
		},
	}
}

// stopTimeout bounds `gwctl stop`: the master kills workers that outlive a short grace.
const stopTimeout = 15 * time.Second

func stopCommand() *cli.Command {
	return signalCommand("stop", "stopped", "fast stop (TERM): returns once the master has exited", syscall.SIGTERM,
		func(master.Paths) time.Duration { return stopTimeout })
}

func testCommand() *cli.Command {
	return &cli.Command{
		Name:  "test",
		Usage: "check conf/config.yaml and exit (nginx -t)",
		Flags: []cli.Flag{prefixFlag()},
		Action: func(c *cli.Context) error {
			paths, err := instancePaths(c)
			if err != nil {
				return err
			}
			// As nginx -t -p fails when the prefix holds no config: a mistyped --prefix must
			// not pass for a tested instance.
			if err := checkPrefixDir(paths.Prefix); err != nil {
				return fmt.Errorf("configuration test failed: %w", err)
			}
			cfg, state, err := conf.LoadState(paths.Config)
			if err == nil {
				err = confio.Check(cfg, paths.Prefix)
			}
			if err != nil {
				return fmt.Errorf("configuration test failed:\n%w", err)
			}
			// A missing or empty file is valid (gwctl start runs on the defaults then), but
			// the user must learn that none of their settings were tested.
			switch state {
			case conf.FileMissing:
				fmt.Printf("no configuration file %s: the built-in defaults were tested, which gwctl start would run on\n", paths.Config)
				fmt.Println("built-in configuration test is successful")
			case conf.FileEmpty:
				fmt.Printf("configuration file %s is empty (it sets no key): the built-in defaults were tested\n", paths.Config)
				fmt.Printf("configuration file %s test is successful\n", paths.Config)
			default:
				fmt.Printf("configuration file %s test is successful\n", paths.Config)
			}
			return nil
		},
	}
}

// newChecker gives the master the workers' own build of a snapshot, to check with.
func newChecker(segments map[string]*shm.Segment, log *errlog.Logger) master.SnapshotChecker {
	return worker.NewChecker(segments, log)
}

// checkPrefixDir says why prefix cannot be an instance directory, or returns nil.
func checkPrefixDir(prefix string) error {
	const hint = "--prefix names the instance directory that holds conf/config.yaml"
	info, err := os.Stat(prefix)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("prefix %s does not exist; %s", prefix, hint)
	case err != nil:
		return fmt.Errorf("prefix %s: %w", prefix, err)
	case !info.IsDir():
		return fmt.Errorf("prefix %s is not a directory; %s", prefix, hint)
	}
	return nil
}

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:   "worker",
		Hidden: true,
		Usage:  "run one worker process (started by the master, never by hand)",
		Flags: []cli.Flag{
			prefixFlag(),
			&cli.IntFlag{Name: "slot"},
			&cli.Uint64Flag{Name: "generation"},
		},
		Action: func(c *cli.Context) error {
			err := worker.Run(worker.Options{
				Prefix: c.String("prefix"), Slot: c.Int("slot"), Generation: c.Uint64("generation"), Version: version,
			})
			if err != nil {
				fmt.Fprintf(os.Stderr, "gw worker slot %d (pid %d): %v\n", c.Int("slot"), os.Getpid(), err)
				os.Exit(worker.ExitCode(err))
			}
			return nil
		},
	}
}
