package prometheus

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"gw/internal/textparse"
	"gw/plugins"
)

func TestExpositionParsesWithEveryFamily(t *testing.T) {
	tab, seg := newTable(t, 100)
	r := buildRecorder(t, seg, `{}`, &plugins.RouteInfo{ID: `we"ird\id`})
	_, log := requestMatching("/a\nb", "", 200, "x", "10.0.0.1:80", time.Millisecond, time.Millisecond/2)
	log(r)
	e := NewExporter(tab, ExporterOptions{
		Hostname: "host-1", Version: "1.2.3",
		Segments: []SegmentInfo{{Name: Name, CapacityBytes: seg.Size(), FreeBytes: tab.FreeBytes},
			{Name: "limit-count", CapacityBytes: 4096, Evictions: func() uint64 { return 9 }}},
	})
	var b bytes.Buffer
	e.WritePrometheus(&b, plugins.HostFacts{Workers: map[string]int{"ready": 2, "draining": 1}, WorkerRestarts: 3, Reloads: 4, ReloadFailures: 1, ConfigVersion: 17})
	fams, err := textparse.Parse(b.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	for _, tt := range []struct {
		family string
		typ    string
		match  map[string]string
		want   float64
	}{
		{"apisix_http_status", "counter", map[string]string{"route": `we"ird\id`, "matched_uri": "/a\nb"}, 1},
		{"apisix_node_info", "gauge", map[string]string{"hostname": "host-1", "version": "1.2.3"}, 1},
		{"apisix_shared_dict_capacity_bytes", "gauge", map[string]string{"name": "limit-count"}, 4096},
		{"apisix_shared_dict_free_space_bytes", "gauge", map[string]string{"name": Name}, float64(99 * EntrySize)},
		{"gw_worker_processes", "gauge", map[string]string{"state": "ready"}, 2},
		{"gw_worker_processes", "gauge", map[string]string{"state": "starting"}, 0},
		{"gw_worker_restarts_total", "counter", nil, 3},
		{"gw_reloads_total", "counter", nil, 4},
		{"gw_reload_failures_total", "counter", nil, 1},
		{"gw_config_version", "gauge", nil, 17},
		{"gw_limit_count_evictions_total", "counter", nil, 9},
		{"gw_metrics_label_sets", "gauge", nil, 1},
		{"gw_metrics_label_sets_max", "gauge", nil, 100},
		{"apisix_http_requests_total", "gauge", nil, 0},
		{"apisix_nginx_http_current_connections", "gauge", map[string]string{"state": "active"}, 0},
	} {
		f := fams[tt.family]
		if f == nil {
			t.Errorf("no %s family", tt.family)
			continue
		}
		if f.Type != tt.typ {
			t.Errorf("%s has TYPE %s, want %s", tt.family, f.Type, tt.typ)
		}
		if got := f.Sum(tt.family, tt.match); got != tt.want {
			t.Errorf("%s%v = %g, want %g", tt.family, tt.match, got, tt.want)
		}
	}
	for _, name := range []string{"apisix_http_latency", "apisix_bandwidth"} {
		if fams[name] == nil || fams[name].Help == "" {
			t.Errorf("%s missing or without HELP text", name)
		}
	}
}

// Scrapes never decrease a counter while requests keep coming.
func TestScrapesAreMonotonic(t *testing.T) {
	tab, seg := newTable(t, 100)
	r := buildRecorder(t, seg, `{}`, route1)
	_, log := request(200, "x", "10.0.0.1:80", time.Millisecond, -1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				log(r)
			}
		}
	}()
	var last float64
	for i := 0; i < 50; i++ {
		got := scrape(t, tab)["apisix_http_status"].Sum("apisix_http_status", nil)
		if got < last {
			t.Fatalf("scrape %d: status sum fell from %g to %g", i, last, got)
		}
		last = got
	}
	close(stop)
	<-done
}

// BenchmarkScrape5000Routes is one whole scrape with 5,000 routes, each seen with two
// status codes (10,000 label sets, the default cap).
func BenchmarkScrape5000Routes(b *testing.B) {
	tab, seg := newTable(b, 10000)
	for i := 0; i < 5000; i++ {
		r := buildRecorder(b, seg, `{}`, &plugins.RouteInfo{ID: fmt.Sprint(i), ServiceID: "s1"})
		uri := fmt.Sprintf("/api/v1/resource-%d/*", i)
		for _, code := range []int{200, 404} {
			_, log := requestMatching(uri, "", code, "x", "10.0.0.1:8080", time.Millisecond, time.Millisecond/2)
			log(r)
		}
	}
	e := NewExporter(tab, ExporterOptions{Hostname: "h", Version: "v"})
	var size int
	b.ReportAllocs()
	for b.Loop() {
		var n countingWriter
		e.WritePrometheus(&n, plugins.HostFacts{})
		size = int(n)
	}
	b.ReportMetric(float64(size)/(1<<20), "MB/scrape")
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

var _ io.Writer = new(countingWriter)

func TestUpstreamStatusGauge(t *testing.T) {
	tab, _ := newTable(t, 10)
	e := NewExporter(tab, ExporterOptions{Hostname: "h", Version: "v"})
	var b bytes.Buffer
	e.WritePrometheus(&b, plugins.HostFacts{})
	if bytes.Contains(b.Bytes(), []byte("apisix_upstream_status")) {
		t.Errorf("apisix_upstream_status present without health checks:\n%s", b.String())
	}
	b.Reset()
	e.WritePrometheus(&b, plugins.HostFacts{UpstreamStatus: []plugins.UpstreamStatus{
		{Name: "/apisix/upstreams/1", IP: "127.0.0.1", Port: "1980", Healthy: true},
		{Name: "/apisix/upstreams/1", IP: "127.0.0.1", Port: "1981", Healthy: false},
		{Name: `/apisix/routes/a"b`, IP: "::1", Port: "80", Healthy: true},
	}})
	fams, err := textparse.Parse(b.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	f := fams["apisix_upstream_status"]
	if f == nil || f.Type != "gauge" || f.Help == "" {
		t.Fatalf("family %+v\n%s", f, b.String())
	}
	for _, tt := range []struct {
		match map[string]string
		want  float64
	}{
		{map[string]string{"name": "/apisix/upstreams/1", "port": "1980"}, 1},
		{map[string]string{"name": "/apisix/upstreams/1", "port": "1981"}, 0},
		{map[string]string{"name": `/apisix/routes/a"b`, "ip": "::1", "port": "80"}, 1},
		{map[string]string{"name": "/apisix/upstreams/1"}, 1},
	} {
		if got := f.Sum("apisix_upstream_status", tt.match); got != tt.want {
			t.Errorf("apisix_upstream_status%v = %g, want %g", tt.match, got, tt.want)
		}
	}
}
