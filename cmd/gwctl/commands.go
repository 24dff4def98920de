package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"gw/conf"
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

// startTimeout bounds how long `gwctl start` waits for every worker to report ready.
const startTimeout = 60 * time.Second

func startCommand() *cli.Command {
	return &cli.Command{
		Name:  "start",
		Usage: "start the master and its workers; returns once every worker serves",
		Flags: []cli.Flag{
			prefixFlag(),
			&cli.IntFlag{Name: "workers", Aliases: []string{"w"}, Usage: "worker processes (overrides worker_processes for this master's life)"},
			&cli.BoolFlag{Name: "foreground", Usage: "keep the master attached (systemd, containers)"},
			&cli.IntFlag{Name: "notify-fd", Hidden: true, Usage: "pipe to the daemonizing parent"},
			&cli.StringFlag{Name: "binary", Hidden: true, Usage: "path of gwctl on disk, started again by an upgrade"},
			&cli.BoolFlag{Name: "no-stderr", Hidden: true, Usage: "do not copy the error log to stderr"},
			&cli.DurationFlag{Name: "upgrade-timeout", Value: time.Minute, Usage: "how long a new binary may take to become ready in `gwctl upgrade`"},
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
					opts.Notify = os.NewFile(uintptr(fd), "notify")
				} else if !c.Bool("no-stderr") {
					opts.Stderr = os.Stderr
				}
				return master.Run(opts)
			}
			return daemonize(c, paths)
		},
	}
}

// daemonize starts the master in its own session, detached from the terminal, and waits on
// a pipe for its verdict so that the exit code tells the truth about the start.
func daemonize(c *cli.Context, paths master.Paths) error {
	cfg, err := conf.Load(paths.Config)
	if err != nil {
		return err
	}
	if err := cfg.CheckFiles(paths.Prefix); err != nil {
		return err
	}
	if pid, err := paths.RunningMaster(); err == nil {
		return fmt.Errorf("gw is already running in %s (pid %d)", paths.Prefix, pid)
	}
	if err := os.MkdirAll(paths.Logs, 0o700); err != nil {
		return err
	}
	logFile, err := os.OpenFile(paths.ErrorLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	verdict, notify, err := os.Pipe()
	if err != nil {
		return err
	}
	defer verdict.Close()
	binary, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary's path: %w", err)
	}
	args := []string{"start", "--foreground", "--prefix", paths.Prefix, "--notify-fd", "3", "--binary", binary,
		"--upgrade-timeout", c.Duration("upgrade-timeout").String()}
	if n := c.Int("workers"); n > 0 {
		args = append(args, "--workers", strconv.Itoa(n))
	}
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = master.ProcessTitle // what ps shows; an upgraded master sets it itself
	cmd.Dir = paths.Prefix
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{notify}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		notify.Close()
		return fmt.Errorf("starting master: %w", err)
	}
	notify.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(verdict).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	select {
	case line := <-lines:
		switch {
		case strings.HasPrefix(line, "ready "):
			fmt.Println("gw started:", strings.TrimPrefix(line, "ready "))
			if _, n, ok := strings.Cut(line, " left_out="); ok {
				fmt.Printf("warning: %s stored objects are left out and not served; `gwctl status` and logs/error.log name each one\n", n)
			}
			return nil
		case strings.HasPrefix(line, "error: "):
			<-exited
			return errors.New(strings.TrimPrefix(line, "error: "))
		default:
			<-exited
			return fmt.Errorf("master exited during start-up; see %s", paths.ErrorLog)
		}
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		return fmt.Errorf("master not ready within %v; see %s", startTimeout, paths.ErrorLog)
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
				err = cfg.CheckFiles(paths.Prefix)
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
