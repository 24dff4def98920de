package master

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gw/conf"
	"gw/internal/confio"
)

// The daemon handshake. `gwctl start` must exit with the truth about the start, yet the
// master it starts must outlive it, detached from the terminal. So Daemonize starts this
// binary again as `start --foreground --notify-fd 3`, in a session of its own, its stdout
// and stderr on the error log, and reads one line from a pipe whose write end the master
// holds as Options.Notify:
//
//	ready pid=<pid> workers=<n> listen=<addr,...>[ tls=<addr,...>] admin=<addr>[ left_out=<n>]
//	error: <why the start failed>
//
// The master writes "ready" once every worker of its first generation serves and the pid
// file names it, "error: ..." when start fails, and closes the pipe either way. A master
// that dies without a word closes it by dying, so the read ends at once. Daemonize kills a
// master that has said nothing within startTimeout.

// notifyFD is the descriptor the daemonized master finds the pipe on (ExtraFiles[0]).
const notifyFD = 3

// startTimeout bounds how long Daemonize waits for every worker to report ready.
const startTimeout = 60 * time.Second

// DaemonOptions are the `gwctl start` flags the daemonized master is started with.
type DaemonOptions struct {
	Workers        int           // --workers, when > 0
	UpgradeTimeout time.Duration // --upgrade-timeout
}

// Started is what a daemonized master said once it served.
type Started struct {
	// Summary is its "ready" line without the word: pid=... workers=... listen=... admin=...
	Summary string
	// LeftOut counts the stored objects it left out and does not serve.
	LeftOut int
}

// Daemonize starts the master of paths in its own session, detached from the terminal,
// and waits for its verdict: it returns once every worker serves, or with why the master
// did not start.
func Daemonize(paths Paths, opts DaemonOptions) (Started, error) {
	cfg, err := conf.Load(paths.Config)
	if err != nil {
		return Started{}, err
	}
	if err := confio.Check(cfg, paths.Prefix); err != nil {
		return Started{}, err
	}
	if pid, err := paths.RunningMaster(); err == nil {
		return Started{}, fmt.Errorf("gw is already running in %s (pid %d)", paths.Prefix, pid)
	}
	if err := os.MkdirAll(paths.Logs, 0o700); err != nil {
		return Started{}, err
	}
	logFile, err := os.OpenFile(paths.ErrorLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return Started{}, err
	}
	defer logFile.Close()
	verdict, notify, err := os.Pipe()
	if err != nil {
		return Started{}, err
	}
	defer verdict.Close()
	binary, err := os.Executable()
	if err != nil {
		return Started{}, fmt.Errorf("finding this binary's path: %w", err)
	}
	args := []string{"start", "--foreground", "--prefix", paths.Prefix, "--notify-fd", strconv.Itoa(notifyFD), "--binary", binary,
		"--upgrade-timeout", opts.UpgradeTimeout.String()}
	if opts.Workers > 0 {
		args = append(args, "--workers", strconv.Itoa(opts.Workers))
	}
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = ProcessTitle // what ps shows; an upgraded master sets it itself
	cmd.Dir = paths.Prefix
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{notify}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		notify.Close()
		return Started{}, fmt.Errorf("starting master: %w", err)
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
			return parseReady(line), nil
		case strings.HasPrefix(line, "error: "):
			<-exited
			return Started{}, errors.New(strings.TrimPrefix(line, "error: "))
		default:
			<-exited
			return Started{}, fmt.Errorf("master exited during start-up; see %s", paths.ErrorLog)
		}
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		return Started{}, fmt.Errorf("master not ready within %v; see %s", startTimeout, paths.ErrorLog)
	}
}

func parseReady(line string) Started {
	started := Started{Summary: strings.TrimPrefix(line, "ready ")}
	if _, n, ok := strings.Cut(line, " left_out="); ok {
		started.LeftOut, _ = strconv.Atoi(n)
	}
	return started
}

// NotifyPipe is the master's end of the handshake, inherited as fd (`--notify-fd`).
// It is closed on exec: a worker or a new master that held it would keep the pipe open
// after this master died, and leave Daemonize waiting out startTimeout.
func NotifyPipe(fd int) io.WriteCloser {
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "notify")
}

// notifyReady writes the handshake's "ready" line and closes the pipe. In the foreground
// form, which has no pipe, it writes the line the daemon form's gwctl prints, to stderr,
// so `gwctl start --foreground` (make run, a container's log) says where it listens too.
func (m *Master) notifyReady(gen *generation, cfg *conf.Config, snap *conf.Snapshot) {
	if m.opts.Notify == nil && m.opts.Stderr == nil {
		return
	}
	// The TLS addresses are named apart: a client must know which ports speak TLS.
	tlsListen := ""
	if cfg.SSL.Enabled {
		tlsListen = " tls=" + strings.Join(cfg.SSL.Listen, ",")
	}
	leftOut := ""
	if n := len(snap.LeftOut); n > 0 {
		leftOut = fmt.Sprintf(" left_out=%d", n)
	}
	summary := fmt.Sprintf("pid=%d workers=%d listen=%s%s admin=%s%s", os.Getpid(), gen.workers,
		strings.Join(cfg.NodeListen, ","), tlsListen, cfg.Admin.Listen, leftOut)
	if m.opts.Notify == nil {
		fmt.Fprintln(m.opts.Stderr, StartedLine(summary))
		if n := len(snap.LeftOut); n > 0 {
			fmt.Fprintln(m.opts.Stderr, LeftOutWarning(n))
		}
		return
	}
	fmt.Fprintf(m.opts.Notify, "ready %s\n", summary)
	m.opts.Notify.Close()
	m.opts.Notify = nil
}

// StartedLine is what `gwctl start` says once every worker serves, in both forms.
func StartedLine(summary string) string { return "gw started: " + summary }

// LeftOutWarning follows StartedLine when stored objects could not be served.
func LeftOutWarning(n int) string {
	return fmt.Sprintf("warning: %d stored objects are left out and not served; `gwctl status` and logs/error.log name each one", n)
}

// notifyFailed writes the handshake's "error" line and closes the pipe, unless "ready"
// went out already.
func (m *Master) notifyFailed(err error) {
	if m.opts.Notify == nil {
		return
	}
	fmt.Fprintf(m.opts.Notify, "error: %v\n", err)
	m.opts.Notify.Close()
	m.opts.Notify = nil
}
