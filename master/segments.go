package master

import (
	"fmt"
	"sort"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
)

// createSegments makes every plugin's shared-memory segment, or maps the old master's
// after an upgrade. They live as long as the master, so counters survive worker crashes,
// reloads and upgrades; a segment whose header names another layout is refused.
func (m *Master) createSegments(cfg *conf.Config) error {
	m.segments = map[string]*shm.Segment{}
	for name, spec := range plugins.Segments() {
		f, err := m.inherited(handOverSegment(name))
		if err != nil {
			return err
		}
		if f != nil {
			seg, err := shm.Open(f, spec.Layout)
			f.Close()
			if err != nil {
				return fmt.Errorf("shared memory for %s handed over by the old master: %w; upgrade refused", name, err)
			}
			m.segments[name] = seg
			continue
		}
		seg, err := shm.Create(spec.Layout, spec.Size(cfg))
		if err != nil {
			return fmt.Errorf("shared memory for %s: %w", name, err)
		}
		m.segments[name] = seg
		if spec.Init != nil {
			if err := spec.Init(seg); err != nil {
				return fmt.Errorf("shared memory for %s: %w", name, err)
			}
		}
	}
	return nil
}

// segmentNames lists the segments in a fixed order, so every worker gets the same fds.
func (m *Master) segmentNames() []string {
	names := make([]string, 0, len(m.segments))
	for name := range m.segments {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
