package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

//go:embed report.lua
var wrkScript []byte

// wrkResult is wrk's summary as report.lua prints it.
type wrkResult struct {
	Requests      int64   `json:"requests"`
	DurationUS    float64 `json:"duration_us"`
	Bytes         int64   `json:"bytes"`
	ConnectErrors int64   `json:"connect_errors"`
	ReadErrors    int64   `json:"read_errors"`
	WriteErrors   int64   `json:"write_errors"`
	StatusErrors  int64   `json:"status_errors"` // responses other than 2xx and 3xx
	Timeouts      int64   `json:"timeouts"`
	P50US         float64 `json:"p50_us"`
	P90US         float64 `json:"p90_us"`
	P99US         float64 `json:"p99_us"`
	MaxUS         float64 `json:"max_us"`
}

func (r wrkResult) errors() int64 {
	return r.ConnectErrors + r.ReadErrors + r.WriteErrors + r.StatusErrors + r.Timeouts
}

// parseWrk finds report.lua's line in wrk's output.
func parseWrk(out string) (wrkResult, error) {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "GWBENCH "); ok {
			var r wrkResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				return r, fmt.Errorf("wrk summary %q: %w", rest, err)
			}
			if r.DurationUS <= 0 {
				return r, fmt.Errorf("wrk summary %q: no duration", rest)
			}
			return r, nil
		}
	}
	return wrkResult{}, fmt.Errorf("no summary in wrk's output (is wrk built with Lua?):\n%s", tail([]byte(out), 2000))
}

// loadRun is one load generator run with the CPU time it used itself.
type loadRun struct {
	output     string
	cpuSeconds float64
}

// runPinned runs a load generator on cpus and returns its output and own CPU time.
func runPinned(cpus string, argv ...string) (loadRun, error) {
	cmd := pinned(cpus, argv...)
	out, err := cmd.CombinedOutput()
	run := loadRun{output: string(out)}
	if cmd.ProcessState != nil {
		run.cpuSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if err != nil {
		return run, fmt.Errorf("%s: %v\n%s", argv[0], err, tail(out, 2000))
	}
	return run, nil
}

// wrkArgs is one wrk invocation: threads, connections, duration, the summary script and
// the request's extra header fields ("Name: value").
func wrkArgs(bin, script, url string, threads, connections int, d time.Duration, headers ...string) []string {
	args := []string{bin, "-t", strconv.Itoa(threads), "-c", strconv.Itoa(connections),
		"-d", fmt.Sprintf("%.0fs", d.Seconds()), "--latency", "-s", script}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	return append(args, url)
}

// abResult is what ApacheBench reports, the figures seed 001 quotes.
type abResult struct {
	Complete    int64   `json:"complete"`
	Failed      int64   `json:"failed"`
	WriteErrors int64   `json:"write_errors"`
	Non2xx      int64   `json:"non_2xx"`
	RPS         float64 `json:"rps"`
	Seconds     float64 `json:"seconds"`
	P50MS       float64 `json:"p50_ms"`
	P99MS       float64 `json:"p99_ms"`
}

var (
	abNumber = regexp.MustCompile(`^(Complete requests|Failed requests|Write errors|Non-2xx responses|Requests per second|Time taken for tests):\s+([0-9.]+)`)
	abPct    = regexp.MustCompile(`^\s+(50|99)%\s+([0-9.]+)`)
)

func parseAB(out string) (abResult, error) {
	var r abResult
	seen := false
	for _, line := range strings.Split(out, "\n") {
		if m := abNumber.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return r, fmt.Errorf("ab: %q: %w", line, err)
			}
			switch m[1] {
			case "Complete requests":
				r.Complete, seen = int64(v), true
			case "Failed requests":
				r.Failed = int64(v)
			case "Write errors":
				r.WriteErrors = int64(v)
			case "Non-2xx responses":
				r.Non2xx = int64(v)
			case "Requests per second":
				r.RPS = v
			case "Time taken for tests":
				r.Seconds = v
			}
		} else if m := abPct.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			if m[1] == "50" {
				r.P50MS = v
			} else {
				r.P99MS = v
			}
		}
	}
	if !seen {
		return r, fmt.Errorf("no summary in ab's output:\n%s", tail([]byte(out), 2000))
	}
	return r, nil
}
