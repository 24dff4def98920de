package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"gw/conf"
	"gw/master"
)

// reloadTimeout bounds `gwctl reload`: the master waits up to 15 s for each new worker.
const reloadTimeout = 2 * time.Minute

// controlCommand is a verb the master answers over its control socket, so the exit code
// is the outcome, not merely the delivery of a signal.
func controlCommand(name, usage string, timeout time.Duration, failure string) *cli.Command {
	return &cli.Command{
		Name:  name,
		Usage: usage,
		Flags: []cli.Flag{prefixFlag()},
		Action: func(c *cli.Context) error {
			paths, err := runningInstance(c)
			if err != nil {
				return err
			}
			reply, err := master.Control(paths, name, timeout)
			if err != nil {
				return fmt.Errorf("%s: %w", failure, err)
			}
			fmt.Println(reply.Message)
			return nil
		},
	}
}

func reloadCommand() *cli.Command {
	return controlCommand("reload", "re-read conf/config.yaml and replace the workers (HUP); exits non-zero if the old ones keep serving",
		reloadTimeout, "reload failed, the previous configuration keeps serving")
}

func upgradeCommand() *cli.Command {
	return controlCommand("upgrade", "replace the running binary with the one now on disk (USR2), under load, losing nothing",
		reloadTimeout, "upgrade failed")
}

func reopenCommand() *cli.Command {
	return controlCommand("reopen", "reopen the log files (USR1), after logrotate renamed them", 10*time.Second, "reopen failed")
}

// signalCommand is a verb that ends the master with sig and waits until it has exited.
// done is the past tense the verb prints on success.
func signalCommand(name, done, usage string, sig syscall.Signal, timeout func(master.Paths) time.Duration) *cli.Command {
	return &cli.Command{
		Name:  name,
		Usage: usage,
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
			if err := syscall.Kill(pid, sig); err != nil {
				return fmt.Errorf("signalling master %d: %w", pid, err)
			}
			wait := timeout(paths)
			if !paths.WaitGone(pid, wait) {
				return fmt.Errorf("master %d still running %v after %v; see %s", pid, wait, sig, paths.ErrorLog)
			}
			fmt.Printf("gw %s (master pid %d)\n", done, pid)
			return nil
		},
	}
}

func quitCommand() *cli.Command {
	return signalCommand("quit", "quit", "graceful stop (QUIT): finish in-flight requests, then exit; returns once the master has exited",
		syscall.SIGQUIT, func(paths master.Paths) time.Duration {
			timeout := 240 * time.Second
			if cfg, err := conf.Load(paths.Config); err == nil {
				timeout = cfg.WorkerShutdownTimeout
			}
			return timeout + 10*time.Second
		})
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
			if e := s.Etcd; e != nil {
				reach := "reachable"
				if !e.Reachable {
					reach = "UNREACHABLE"
				}
				fmt.Printf("etcd %s (prefix %s) %s, node id %s, serving revision %d\n", strings.Join(e.Endpoints, ","), e.Prefix, reach, e.NodeID, e.ServedRevision)
				if e.Cached {
					fmt.Printf("serving the CACHED config from %s: etcd has not answered since this node started\n", e.CachePath)
				}
				if err := printNodes(e, now); err != nil {
					return err
				}
			}
			if f := s.Standalone; f != nil {
				if f.Loaded.IsZero() {
					fmt.Printf("standalone file %s: not served yet\n", f.Path)
				} else {
					fmt.Printf("standalone file %s, served as read at %s\n", f.Path, f.Loaded.UTC().Format(time.RFC3339))
				}
				if f.Problem != "" {
					fmt.Printf("the file on disk is NOT served: %s\n", f.Problem)
				}
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SLOT\tPID\tGEN\tSTATE\tUPTIME\tREQUESTS\tCONNECTIONS")
			for _, w := range s.Workers {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%d\t%d\n", w.Slot, w.PID, w.Generation, w.State,
					now.Sub(w.Started).Round(time.Second), w.Requests, w.Connections)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, w := range s.Workers {
				if w.Rejected != "" {
					fmt.Printf("worker slot %d (pid %d) %s\n", w.Slot, w.PID, w.Rejected)
				}
			}
			if len(s.LeftOut) > 0 {
				fix := "fix each with a PUT, or DELETE it"
				if s.Standalone != nil {
					fix = "fix each in " + s.Standalone.Path
				}
				fmt.Printf("%d stored objects are left out and not served (%s):\n", len(s.LeftOut), fix)
				for _, l := range s.LeftOut {
					fmt.Printf("  %s\n", l)
				}
			}
			return nil
		},
	}
}

// printNodes lists the cluster's live nodes as their records say, each with its lag: how
// many revisions it is behind the newest any node serves.
func printNodes(e *master.EtcdFacts, now time.Time) error {
	if len(e.Nodes) == 0 {
		return nil
	}
	newest := e.ServedRevision
	for _, n := range e.Nodes {
		newest = max(newest, n.Revision)
	}
	fmt.Printf("cluster: %d live nodes (records under %s/gw/nodes/, lease %s)\n", len(e.Nodes), e.Prefix, e.NodeLease)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tHOST\tPID\tVERSION\tREVISION\tLAG\tRECORDED")
	for _, n := range e.Nodes {
		id := n.ID
		if n.Self {
			id += " (this)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s ago\n", id, n.Role, n.Hostname, n.PID, n.Version, n.Revision,
			newest-n.Revision, now.Sub(n.Updated).Round(time.Second))
	}
	return tw.Flush()
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
