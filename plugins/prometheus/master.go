package prometheus

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"syscall"

	"gw/plugins"
	"gw/shm"
)

var (
	_ plugins.MasterPart    = plugin{}
	_ plugins.MetricsWriter = (*masterPart)(nil)
)

// StartMaster opens the metrics table in the master: for the export server's page, and to
// retire the area of each worker as the master reaps it.
func (plugin) StartMaster(env *plugins.MasterEnv) (plugins.MasterInstance, error) {
	seg := env.Segments[Name]
	if seg == nil {
		return nil, errors.New("no metrics segment was created")
	}
	table, err := OpenTable(seg)
	if err != nil {
		return nil, fmt.Errorf("shared memory for %s: %w", Name, err)
	}
	hostname, _ := os.Hostname()
	exporter := NewExporter(table, ExporterOptions{
		Hostname: hostname,
		Version:  env.Version,
		Segments: segmentInfos(env.Segments),
		Alive:    processAlive,
	})
	return &masterPart{table: table, exporter: exporter}, nil
}

// segmentInfos describes every segment for the shared_dict gauges, in name order, with
// the statistics its spec offers.
func segmentInfos(segments map[string]*shm.Segment) []SegmentInfo {
	specs := plugins.Segments()
	names := make([]string, 0, len(segments))
	for name := range segments {
		names = append(names, name)
	}
	sort.Strings(names)
	infos := make([]SegmentInfo, 0, len(names))
	for _, name := range names {
		seg, spec := segments[name], specs[name]
		info := SegmentInfo{Name: name, CapacityBytes: seg.Size()}
		if spec != nil && spec.FreeBytes != nil {
			info.FreeBytes = func() int { return spec.FreeBytes(seg) }
		}
		if spec != nil && spec.Evictions != nil {
			info.Evictions = func() uint64 { return spec.Evictions(seg) }
		}
		infos = append(infos, info)
	}
	return infos
}

// masterPart is the plugin's part in the master. Retirements run as workers are reaped,
// and scrapes as they come; Close waits for both and ends them, so the master may unmap
// the segment once it returns.
type masterPart struct {
	mu       sync.RWMutex // read-held while the table is used
	table    *Table       // nil once closed
	exporter *Exporter
}

// WorkerExited retires the area of pid, a worker that has exited and is not yet reaped,
// rather than at the next scrape, which keeps areas for the workers to come however
// rarely anything scrapes (issue 17: 256 areas went in 128 reloads of two workers). Areas
// of other processes that are gone are retired too, such as an old master's workers,
// which outlive it after an upgrade and which this master never reaps.
func (m *masterPart) WorkerExited(pid int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.table != nil {
		m.table.RetireWorkerAreas(func(p int) bool { return p == pid || !processAlive(p) })
	}
}

// WriteMetrics writes the whole exposition, read from the segment; nothing once closed.
func (m *masterPart) WriteMetrics(w io.Writer, facts plugins.HostFacts) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.table != nil {
		m.exporter.WritePrometheus(w, facts)
	}
}

// Close ends retirements and scrapes; the segment may be unmapped once it returns.
func (m *masterPart) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.table = nil
}

// processAlive reports whether pid exists (a zombie not yet reaped still does).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
