package batch

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
)

// A logger's segment holds its Counters, two words summed by every worker: entries
// dropped with the buffer full, and entries of batches that failed.
const (
	offBufferFull = 0
	offSendFailed = 8
	segmentBytes  = 16
)

// SegmentSpec is the shared-memory segment of the logger named plugin
// (plugins.SegmentOwner), where its workers count what they drop.
func SegmentSpec(plugin string) *plugins.SegmentSpec {
	return &plugins.SegmentSpec{
		Layout: shm.Layout{Name: plugin, Version: 1},
		Size:   func(*conf.Config) int { return segmentBytes },
	}
}

// CountersOf are the counters in the logger's segment (Shared.Segments[plugin]); words
// of their own when the worker has no segment (a chain built in a test).
func CountersOf(shared *plugins.Shared, plugin string) Counters {
	if shared != nil {
		if seg := shared.Segments[plugin]; seg != nil && seg.Size() >= segmentBytes {
			return Counters{BufferFull: seg.Word(offBufferFull), SendFailed: seg.Word(offSendFailed)}
		}
	}
	return Counters{BufferFull: new(atomic.Uint64), SendFailed: new(atomic.Uint64)}
}

// MasterPart renders the logger's drops on the master's metrics page as
// gw_<plugin>_dropped_entries_total{reason="buffer_full"|"send_failed"}, '-' written '_'.
// A logger's plugin type embeds it (plugins.MasterPart).
type MasterPart struct{ Plugin string }

// StartMaster implements plugins.MasterPart.
func (m MasterPart) StartMaster(env *plugins.MasterEnv) (plugins.MasterInstance, error) {
	seg := env.Segments[m.Plugin]
	if seg == nil {
		return nil, errors.New("no segment was created for " + m.Plugin)
	}
	return &metrics{name: "gw_" + strings.ReplaceAll(m.Plugin, "-", "_") + "_dropped_entries_total", plugin: m.Plugin, seg: seg}, nil
}

type metrics struct {
	name, plugin string
	seg          *shm.Segment
}

func (m *metrics) WorkerExited(int) {}
func (m *metrics) Close()           {}

// WriteMetrics implements plugins.MetricsWriter.
func (m *metrics) WriteMetrics(w io.Writer, _ plugins.HostFacts) {
	fmt.Fprintf(w, "# HELP %s Log entries %s dropped: the worker's buffer full, or a batch failed every retry.\n# TYPE %s counter\n", m.name, m.plugin, m.name)
	fmt.Fprintf(w, "%s{reason=\"buffer_full\"} %d\n", m.name, m.seg.Word(offBufferFull).Load())
	fmt.Fprintf(w, "%s{reason=\"send_failed\"} %d\n", m.name, m.seg.Word(offSendFailed).Load())
}

var (
	_ plugins.MasterPart    = MasterPart{}
	_ plugins.MetricsWriter = (*metrics)(nil)
)
