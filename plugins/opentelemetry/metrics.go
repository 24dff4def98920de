package opentelemetry

import (
	"fmt"
	"io"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
)

// The plugin's segment holds three counters that every worker adds to: the spans sent,
// those dropped for a full queue, and those lost to a failed export. The master renders
// them on the metrics page.
var segmentLayout = shm.Layout{Name: "opentelemetry", Version: 1}

const (
	offExported = 0
	offDropped  = 8
	offFailed   = 16
	segmentSize = 64
)

var (
	_ plugins.SegmentOwner = plugin{}
	_ plugins.MasterPart   = plugin{}
)

func (plugin) Segment() *plugins.SegmentSpec {
	return &plugins.SegmentSpec{Layout: segmentLayout, Size: func(*conf.Config) int { return segmentSize }}
}

func segmentCounters(seg *shm.Segment) *counters {
	return &counters{exported: seg.Word(offExported), dropped: seg.Word(offDropped), failed: seg.Word(offFailed)}
}

// StartMaster renders the counters on the master's metrics page.
func (plugin) StartMaster(env *plugins.MasterEnv) (plugins.MasterInstance, error) {
	seg := env.Segments[Name]
	if seg == nil {
		return nil, nil
	}
	return &metricsPart{ctrs: segmentCounters(seg)}, nil
}

type metricsPart struct{ ctrs *counters }

var _ plugins.MetricsWriter = (*metricsPart)(nil)

func (*metricsPart) WorkerExited(int) {}
func (*metricsPart) Close()           {}

// WriteMetrics writes gw_opentelemetry_spans_total by result.
func (m *metricsPart) WriteMetrics(w io.Writer, _ plugins.HostFacts) {
	fmt.Fprintf(w, "# HELP gw_opentelemetry_spans_total Spans of the opentelemetry plugin by fate: exported, dropped (the worker's queue was full), failed (the export failed).\n"+
		"# TYPE gw_opentelemetry_spans_total counter\n"+
		"gw_opentelemetry_spans_total{result=\"exported\"} %d\n"+
		"gw_opentelemetry_spans_total{result=\"dropped\"} %d\n"+
		"gw_opentelemetry_spans_total{result=\"failed\"} %d\n",
		m.ctrs.exported.Load(), m.ctrs.dropped.Load(), m.ctrs.failed.Load())
}
