package master

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
)

// exitWatcher is a test plugin whose part in the master notes the pids it hears exited,
// and whether each was still a zombie then.
type exitWatcher struct{}

func (exitWatcher) Name() string                                     { return "test-exit-watcher" }
func (exitWatcher) Priority() int                                    { return 0 }
func (exitWatcher) Validate(json.RawMessage) error                   { return nil }
func (exitWatcher) Build(json.RawMessage, *plugins.Env) (any, error) { return nil, nil }
func (exitWatcher) StartMaster(*plugins.MasterEnv) (plugins.MasterInstance, error) {
	return &watchedExits{}, nil
}

type watchedExits struct {
	mu     sync.Mutex
	exited []int // pids heard, while their zombies were there
	closed bool
}

func (w *watchedExits) WorkerExited(pid int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, zombie := readZombie(pid); zombie && !w.closed {
		w.exited = append(w.exited, pid)
	}
}

func (w *watchedExits) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

func (w *watchedExits) WriteMetrics(out io.Writer, facts plugins.HostFacts) {
	_, _ = out.Write([]byte("test_config_version " + string(rune('0'+facts.ConfigVersion)) + "\n"))
}

var registerExitWatcher = sync.OnceFunc(func() { plugins.Register(exitWatcher{}) })

// testSegments makes every registered segment, as the master does at start.
func testSegments(t *testing.T) map[string]*shm.Segment {
	t.Helper()
	cfg := &conf.Config{Shm: conf.Shm{LimitCount: 1 << 16, Metrics: 1 << 20, HealthCheck: 1 << 16}}
	segments := map[string]*shm.Segment{}
	for name, spec := range plugins.Segments() {
		seg, err := shm.Create(spec.Layout, spec.Size(cfg))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { seg.Close() })
		if spec.Init != nil {
			if err := spec.Init(seg); err != nil {
				t.Fatal(err)
			}
		}
		segments[name] = seg
	}
	return segments
}

// The plugins' parts hear of a worker's exit between the exit and the reap, while the
// zombie still holds its pid (waitExited leaves it), and the exit status is still there
// for cmd.Wait; once closed, they hear nothing, however often close is called.
func TestPluginPartsHearExitsBeforeTheReap(t *testing.T) {
	registerExitWatcher()
	parts, err := startPluginParts(testSegments(t), &conf.Config{}, "v", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	var watcher *watchedExits
	for _, p := range parts.parts {
		if w, ok := p.(*watchedExits); ok {
			watcher = w
		}
	}
	if watcher == nil {
		t.Fatal("the test plugin's part was not started")
	}
	if ws := parts.metricsWriters(); !slices.ContainsFunc(ws, func(w plugins.MetricsWriter) bool { return w == watcher }) {
		t.Error("the part that writes metrics is not among the metrics writers")
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitExited(cmd.Process.Pid); err != nil {
		t.Fatalf("waitExited: %v", err)
	}
	parts.workerExited(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child's exit status after the parts heard of it: %v", err)
	}
	if !slices.Equal(watcher.exited, []int{cmd.Process.Pid}) {
		t.Fatalf("the part heard %v while a zombie held the pid, want [%d]", watcher.exited, cmd.Process.Pid)
	}

	parts.close()
	parts.close()
	parts.workerExited(os.Getpid())
	if len(watcher.exited) != 1 || !watcher.closed {
		t.Fatalf("after close: heard %v, closed %v", watcher.exited, watcher.closed)
	}
	var nothing *pluginParts // a master that failed before starting them
	nothing.workerExited(1)
	nothing.close()
	if nothing.metricsWriters() != nil {
		t.Error("a nil pluginParts has metrics writers")
	}
}

// The export server answers GET and HEAD on its URI with every writer's page, given the
// master's facts, and 404 to anything else.
func TestMetricsHandlerServesThePluginsPage(t *testing.T) {
	m := &Master{sup: newSupervisor(nil, nil), version: 7}
	m.sup.gen = &generation{}
	h := &metricsHandler{m: m, uri: "/metrics", writers: []plugins.MetricsWriter{&watchedExits{}, &watchedExits{}}}
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/metrics", 200, "test_config_version 7\ntest_config_version 7\n"},
		{"POST", "/metrics", 404, ""},
		{"GET", "/other", 404, ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status || (tc.body != "" && rec.Body.String() != tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, rec.Code, rec.Body.String(), tc.status, tc.body)
		}
		if tc.status == 200 && rec.Header().Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("Content-Type %q", rec.Header().Get("Content-Type"))
		}
	}
}
