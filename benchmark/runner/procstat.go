package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times. Linux fixes it at 100 for every
// architecture gw runs on.
const clockTicks = 100

// statFields returns the fields of /proc/<pid>/stat after the command name, which may hold
// spaces and parentheses: field 3 of proc(5) (state) is index 0.
func statFields(stat []byte) ([]string, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("no command name in %q", stat)
	}
	return strings.Fields(string(stat[i+1:])), nil
}

// processTicks is a process's user+system CPU time, every thread included, in clock ticks.
func processTicks(pid int) (int64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcessTicks(stat)
}

func parseProcessTicks(stat []byte) (int64, error) {
	f, err := statFields(stat)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat line %q", stat)
	}
	// proc(5): utime is field 14, stime 15; index 0 here is field 3.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad utime/stime in %q", stat)
	}
	return utime + stime, nil
}

// cpuSeconds sums the CPU time of pids. A process that is gone counts as an error: a
// worker that died mid-run would make the figure a lie.
func cpuSeconds(pids []int) (float64, error) {
	var ticks int64
	for _, pid := range pids {
		t, err := processTicks(pid)
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", pid, err)
		}
		ticks += t
	}
	return float64(ticks) / clockTicks, nil
}

// rssKiB reads VmRSS from /proc/<pid>/status.
func rssKiB(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKiB(status, "VmRSS:")
}

func parseStatusKiB(status []byte, key string) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no %s in status", key)
}

// cpusAllowed reads the affinity list (e.g. "0" or "2-3") a process runs with.
func cpusAllowed(pid int) string {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(rest)
		}
	}
	return "?"
}

// childrenOf lists the live processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f, err := statFields(stat)
		if err == nil && len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(pid) {
			kids = append(kids, child)
		}
	}
	return kids
}

// coreTimes is one reading of /proc/stat's per-CPU lines: busy and total ticks per CPU.
type coreTimes struct {
	busy, total []int64
}

func readCoreTimes() (coreTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return coreTimes{}, err
	}
	return parseCoreTimes(b)
}

func parseCoreTimes(stat []byte) (coreTimes, error) {
	var ct coreTimes
	for _, line := range strings.Split(string(stat), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil || cpu != len(ct.busy) {
			return coreTimes{}, fmt.Errorf("unexpected /proc/stat line %q", line)
		}
		var busy, total int64
		for i, v := range f[1:] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return coreTimes{}, fmt.Errorf("unexpected /proc/stat line %q", line)
			}
			if i >= 8 { // guest and guest_nice are already counted in user and nice
				break
			}
			total += n
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		ct.busy = append(ct.busy, busy)
		ct.total = append(ct.total, total)
	}
	if len(ct.busy) == 0 {
		return coreTimes{}, fmt.Errorf("no per-CPU lines in /proc/stat")
	}
	return ct, nil
}

// busyFraction is how busy each CPU was between two readings, 0 to 1.
func busyFraction(before, after coreTimes) []float64 {
	out := make([]float64, min(len(before.busy), len(after.busy)))
	for i := range out {
		if dt := after.total[i] - before.total[i]; dt > 0 {
			out[i] = float64(after.busy[i]-before.busy[i]) / float64(dt)
		}
	}
	return out
}

// loadAverage reads the 1-minute load average.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
