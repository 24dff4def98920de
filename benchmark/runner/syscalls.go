package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// syscallCount is perf stat counting system calls in a set of processes (the servers'
// workers) while a load runs, started before it and stopped after.
type syscallCount struct {
	cmd                      *exec.Cmd
	out                      bytes.Buffer
	all, epollCtl, epollWait int64
	connect                  int64 // upstream dials
}

// The events: every system call's entry, the poller's (nginx waits with epoll_wait(2),
// Go's runtime with epoll_pwait(2)), and connect(2), the dials to the upstream (more
// requests in flight than the keep-alive pool holds make a worker dial).
var syscallEvents = []string{"raw_syscalls:sys_enter", "syscalls:sys_enter_epoll_ctl",
	"syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait", "syscalls:sys_enter_connect"}

// countSyscalls starts perf stat on pids.
func countSyscalls(pids []int) (*syscallCount, error) {
	if len(pids) == 0 {
		return nil, fmt.Errorf("perf stat: no worker to count")
	}
	ids := make([]string, len(pids))
	for i, p := range pids {
		ids[i] = strconv.Itoa(p)
	}
	c := &syscallCount{}
	c.cmd = exec.Command("perf", "stat", "-x", ",", "-e", strings.Join(syscallEvents, ","), "-p", strings.Join(ids, ","))
	c.cmd.Stderr = &c.out
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf stat (apt-get install linux-perf): %w", err)
	}
	time.Sleep(200 * time.Millisecond) // perf attaches before the load starts
	return c, nil
}

// stop ends the count and reads perf's CSV lines: "count,unit,event,...".
func (c *syscallCount) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	_ = c.cmd.Wait()
	for _, line := range strings.Split(c.out.String(), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch f[2] {
		case syscallEvents[0]:
			c.all = n
		case syscallEvents[1]:
			c.epollCtl = n
		case syscallEvents[2], syscallEvents[3]:
			c.epollWait += n
		case syscallEvents[4]:
			c.connect = n
		}
	}
	if c.all == 0 {
		return fmt.Errorf("perf stat counted no system calls: %s", strings.TrimSpace(c.out.String()))
	}
	return nil
}
