package master

import (
	"os"
	"os/exec"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/plugins/prometheus"
	"gw/shm"
)

// metricsSegmentFD is where a helper child finds the metrics segment (its first ExtraFile).
const metricsSegmentFD = 3

// TestMetricsAreaChild is not a test: run by TestRetireExitedWorkerArea as a child, it
// claims a worker area, serves one request and exits with its connection still open, as a
// worker killed mid-connection does.
func TestMetricsAreaChild(t *testing.T) {
	if os.Getenv("GW_TEST_METRICS_AREA_CHILD") == "" {
		t.Skip("run as a child by TestRetireExitedWorkerArea")
	}
	seg, err := shm.Open(os.NewFile(metricsSegmentFD, "metrics"), prometheus.SegmentLayout)
	if err != nil {
		t.Fatal(err)
	}
	table, err := prometheus.OpenTable(seg)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := prometheus.NewConnTracker(table)
	if err != nil {
		t.Fatal(err)
	}
	var conn prometheus.ConnGauge
	ct.ConnState(&conn, fasthttp.StateNew)
	ct.ConnState(&conn, fasthttp.StateActive)
	os.Exit(0)
}

// A worker's area is retired between its exit and its reap: its request stays counted, its
// open connection is dropped, the area serves the next worker, and the exit status is
// still there for cmd.Wait.
func TestRetireExitedWorkerArea(t *testing.T) {
	cfg := &conf.Config{Shm: conf.Shm{Metrics: 1 << 20}, Prometheus: conf.Prometheus{MaxSeries: 10}}
	seg, err := shm.Create(prometheus.SegmentLayout, prometheus.SegmentSize(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if err := prometheus.InitSegment(seg); err != nil {
		t.Fatal(err)
	}
	areas, err := openWorkerAreas(seg)
	if err != nil {
		t.Fatal(err)
	}
	table := areas.table

	cmd := exec.Command(os.Args[0], "-test.run=^TestMetricsAreaChild$")
	cmd.Env = append(os.Environ(), "GW_TEST_METRICS_AREA_CHILD=1")
	cmd.ExtraFiles = []*os.File{seg.File()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitExited(cmd.Process.Pid); err != nil {
		t.Fatalf("waitExited: %v", err)
	}
	if _, ok := readZombie(cmd.Process.Pid); !ok {
		t.Fatal("waitExited reaped the child: its pid could be reused before the retirement")
	}
	if got := table.ConnStats(); got.Requests != 1 || got.Active != 1 {
		t.Fatalf("the child's counts before retirement: %+v, want 1 request on 1 open connection", got)
	}
	areas.retireExited(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child's exit status after retirement: %v", err)
	}
	want := prometheus.ConnStats{Accepted: 1, Handled: 1, Requests: 1}
	if got := table.ConnStats(); got != want {
		t.Fatalf("after retirement: %+v, want %+v", got, want)
	}
	var last *prometheus.ConnTracker
	for i := range prometheus.WorkerAreas {
		if last, err = prometheus.NewConnTracker(table); err != nil {
			t.Fatalf("worker %d of %d found no area: the child's was not freed: %v", i+1, prometheus.WorkerAreas, err)
		}
	}

	// Once closed, as in the master's teardown before the unmap, nothing is retired: not
	// even the areas of a pid said to have exited (this process's, claimed just now).
	var conn prometheus.ConnGauge
	last.ConnState(&conn, fasthttp.StateNew)
	areas.close()
	areas.retireExited(os.Getpid())
	if got := table.ConnStats(); got.Active != 1 {
		t.Fatalf("an area was retired after close: %+v", got)
	}
}
