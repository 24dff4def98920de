package prometheus

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"gw/conf"
	"gw/internal/textparse"
	"gw/plugins"
	"gw/shm"
)

// metricsSegmentFD is where a helper child finds the metrics segment (its first ExtraFile).
const metricsSegmentFD = 3

// TestMetricsAreaChild is not a test: run by TestMasterRetiresAnExitedWorkersArea as a
// child, it observes one connection as a worker does, serves one request on it and exits
// with the connection still open, as a worker killed mid-connection does.
func TestMetricsAreaChild(t *testing.T) {
	if os.Getenv("GW_TEST_METRICS_AREA_CHILD") == "" {
		t.Skip("run as a child by TestMasterRetiresAnExitedWorkersArea")
	}
	seg, err := shm.Open(os.NewFile(metricsSegmentFD, "metrics"), SegmentLayout)
	if err != nil {
		t.Fatal(err)
	}
	o, err := plugin{}.ObserveConns(&plugins.Shared{Segments: map[string]*shm.Segment{Name: seg}})
	if err != nil {
		t.Fatal(err)
	}
	o.ConnChanged(plugins.ConnUnseen, plugins.ConnNew)
	o.ConnChanged(plugins.ConnNew, plugins.ConnActive)
	os.Exit(0)
}

func newMasterSegment(t *testing.T) *shm.Segment {
	t.Helper()
	cfg := &conf.Config{Shm: conf.Shm{Metrics: 1 << 20}, Prometheus: conf.Prometheus{MaxSeries: 10}}
	seg, err := shm.Create(SegmentLayout, SegmentSize(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	if err := InitSegment(seg); err != nil {
		t.Fatal(err)
	}
	return seg
}

// A worker's area is retired once the master hears it exited: its request stays counted,
// its open connection is dropped, and the area serves the next worker. Once closed, the
// part retires nothing and writes no page.
func TestMasterRetiresAnExitedWorkersArea(t *testing.T) {
	seg := newMasterSegment(t)
	part, err := plugin{}.StartMaster(&plugins.MasterEnv{Segments: map[string]*shm.Segment{Name: seg}, Version: "v"})
	if err != nil {
		t.Fatal(err)
	}
	table, err := OpenTable(seg)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestMetricsAreaChild$")
	cmd.Env = append(os.Environ(), "GW_TEST_METRICS_AREA_CHILD=1")
	cmd.ExtraFiles = []*os.File{seg.File()}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if got := table.ConnStats(); got.Requests != 1 || got.Active != 1 {
		t.Fatalf("the child's counts before retirement: %+v, want 1 request on 1 open connection", got)
	}
	part.WorkerExited(cmd.Process.Pid)
	want := ConnStats{Accepted: 1, Handled: 1, Requests: 1}
	if got := table.ConnStats(); got != want {
		t.Fatalf("after retirement: %+v, want %+v", got, want)
	}
	var last *ConnTracker
	for i := range WorkerAreas {
		if last, err = NewConnTracker(table); err != nil {
			t.Fatalf("worker %d of %d found no area: the child's was not freed: %v", i+1, WorkerAreas, err)
		}
	}

	// Once closed, as in the master's teardown before the unmap, nothing is retired: not
	// even the areas of a pid said to have exited (this process's, claimed just now).
	last.ConnChanged(plugins.ConnUnseen, plugins.ConnNew)
	part.Close()
	part.WorkerExited(os.Getpid())
	if got := table.ConnStats(); got.Active != 1 {
		t.Fatalf("an area was retired after Close: %+v", got)
	}
	var b bytes.Buffer
	part.(plugins.MetricsWriter).WriteMetrics(&b, plugins.HostFacts{})
	if b.Len() != 0 {
		t.Fatalf("a closed part wrote %d bytes of metrics", b.Len())
	}
}

// testEvicting is a plugin with a segment whose table evicts, for the export's reading of
// a segment's statistics.
type testEvicting struct{}

func (testEvicting) Name() string                                     { return "test-evicting" }
func (testEvicting) Priority() int                                    { return 0 }
func (testEvicting) Validate(json.RawMessage) error                   { return nil }
func (testEvicting) Build(json.RawMessage, *plugins.Env) (any, error) { return nil, nil }
func (testEvicting) Segment() *plugins.SegmentSpec {
	return &plugins.SegmentSpec{
		Layout:    shm.Layout{Name: "test-evicting", Version: 1},
		Size:      func(*conf.Config) int { return 64 },
		FreeBytes: func(seg *shm.Segment) int { return seg.Size() - 8 },
		Evictions: func(*shm.Segment) uint64 { return 7 },
	}
}

// The page the master serves carries every segment with what its spec says of it: the
// capacity of all, the free space and evictions of those that report them.
func TestMasterPageReportsEverySegment(t *testing.T) {
	plugins.Register(testEvicting{})
	metricsSeg := newMasterSegment(t)
	evicting, err := shm.Create(testEvicting{}.Segment().Layout, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer evicting.Close()
	health, err := shm.Create(shm.HealthLayout, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer health.Close()
	segments := map[string]*shm.Segment{Name: metricsSeg, "test-evicting": evicting, plugins.HealthSegment: health}
	part, err := plugin{}.StartMaster(&plugins.MasterEnv{Segments: segments, Version: "9.9"})
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close()
	var b bytes.Buffer
	part.(plugins.MetricsWriter).WriteMetrics(&b, plugins.HostFacts{ConfigVersion: 3})
	fams, err := textparse.Parse(b.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	for _, tt := range []struct {
		family string
		match  map[string]string
		want   float64
	}{
		{"apisix_shared_dict_capacity_bytes", map[string]string{"name": plugins.HealthSegment}, float64(health.Size())},
		{"apisix_shared_dict_capacity_bytes", map[string]string{"name": "test-evicting"}, 64},
		{"apisix_shared_dict_free_space_bytes", map[string]string{"name": "test-evicting"}, 56},
		{"apisix_shared_dict_free_space_bytes", map[string]string{"name": Name}, float64(10 * EntrySize)},
		{"gw_test_evicting_evictions_total", nil, 7},
		{"apisix_node_info", map[string]string{"version": "9.9"}, 1},
		{"gw_config_version", nil, 3},
	} {
		if f := fams[tt.family]; f == nil || f.Sum(tt.family, tt.match) != tt.want {
			t.Errorf("%s%v: want %g in\n%s", tt.family, tt.match, tt.want, b.String())
		}
	}
	if strings.Contains(b.String(), `apisix_shared_dict_free_space_bytes{name="`+plugins.HealthSegment) {
		t.Error("the health segment, which reports no free space, has a free-space gauge")
	}
	if _, err := (plugin{}).StartMaster(&plugins.MasterEnv{Segments: map[string]*shm.Segment{}}); err == nil {
		t.Error("StartMaster without the metrics segment succeeded")
	}
}
