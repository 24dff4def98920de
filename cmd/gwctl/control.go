package main

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"gw/conf"
	"gw/master"
)

// reloadTimeout bounds `gwctl reload`: the master waits up to 15 s for each new worker.
const reloadTimeout = 2 * time.Minute

func reloadCommand() *cli.Command {
	return &cli.Command{
		Name:  "reload",
		Usage: "re-read conf/config.yaml and replace the workers (HUP); exits non-zero if the old ones keep serving",
		Flags: []cli.Flag{prefixFlag()},
		Action: func(c *cli.Context) error {
			paths, err := runningInstance(c)
			if err != nil {
				return err
			}
			reply, err := master.Control(paths, "reload", reloadTimeout)
			if err != nil {
				return fmt.Errorf("reload failed, the previous configuration keeps serving: %w", err)
			}
			fmt.Println(reply.Message)
			return nil
		},
	}
}

func upgradeCommand() *cli.Command {
	return &cli.Command{
		Name:  "upgrade",
		Usage: "replace the running binary with the one now on disk (USR2), under load, losing nothing",
		Flags: []cli.Flag{prefixFlag()},
		Action: func(c *cli.Context) error {
			paths, err := runningInstance(c)
			if err != nil {
				return err
			}
			reply, err := master.Control(paths, "upgrade", reloadTimeout)
			if err != nil {
				return fmt.Errorf("upgrade failed: %w", err)
			}
			fmt.Println(reply.Message)
			return nil
		},
	}
}

func reopenCommand() *cli.Command {
	return &cli.Command{
		Name:  "reopen",
		Usage: "reopen the log files (USR1), after logrotate renamed them",
		Flags: []cli.Flag{prefixFlag()},
		Action: func(c *cli.Context) error {
			paths, err := runningInstance(c)
			if err != nil {
				return err
			}
			reply, err := master.Control(paths, "reopen", 10*time.Second)
			if err != nil {
				return err
			}
			fmt.Println(reply.Message)
			return nil
		},
	}
}

func quitCommand() *cli.Command {
	return &cli.Command{
		Name:  "quit",
		Usage: "graceful stop (QUIT): finish in-flight requests, then exit; returns once the master has exited",
		Flags: []cli.Flag{prefixFlag()},
		Action: func(c *cli.Context) error {
			paths, err := instancePaths(c)
			if err != nil {
				return err
			}
			pid, err := paths.RunningMaster()
			if err != nil {
				return err
			}
			timeout := 240 * time.Second
			if cfg, err := conf.Load(paths.Config); err == nil {
				timeout = cfg.WorkerShutdownTimeout
			}
			if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
				return fmt.Errorf("signalling master %d: %w", pid, err)
			}
			if !paths.WaitGone(timeout + 10*time.Second) {
				return fmt.Errorf("master %d still running %v after QUIT; see %s", pid, timeout+10*time.Second, paths.ErrorLog)
			}
			fmt.Printf("gw quit (master pid %d)\n", pid)
			return nil
		},
	}
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the master and its workers",
		Flags: []cli.Flag{prefixFlag(), &cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: func(c *cli.Context) error {
			paths, err := runningInstance(c)
			if err != nil {
				return err
			}
			reply, err := master.Control(paths, "status", 10*time.Second)
			if err != nil {
				return err
			}
			s := reply.Status
			if c.Bool("json") {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(s)
			}
			now := time.Now()
			fmt.Printf("master pid %d, version %s, generation %d, up %s\n", s.PID, s.Version, s.Generation, now.Sub(s.Started).Round(time.Second))
			fmt.Printf("config %s, snapshot version %d, reloads %d (failed %d), worker restarts %d\n",
				s.ConfigSource, s.ConfigVersion, s.Reloads, s.ReloadFailures, s.WorkerRestarts)
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SLOT\tPID\tGEN\tSTATE\tUPTIME\tREQUESTS\tCONNECTIONS")
			for _, w := range s.Workers {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%d\t%d\n", w.Slot, w.PID, w.Generation, w.State,
					now.Sub(w.Started).Round(time.Second), w.Requests, w.Connections)
			}
			return tw.Flush()
		},
	}
}

// runningInstance finds the master or says why not (not running, stale pid file).
func runningInstance(c *cli.Context) (master.Paths, error) {
	paths, err := instancePaths(c)
	if err != nil {
		return paths, err
	}
	if _, err := paths.RunningMaster(); err != nil {
		return paths, err
	}
	return paths, nil
}
