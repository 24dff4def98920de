package master

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"gw/conf"
)

// SnapshotChecker builds a snapshot as the workers will under cfg and returns the objects
// that fail to build (worker.Checker).
type SnapshotChecker interface {
	Check(snap *conf.Snapshot, cfg *conf.Config) ([]conf.LeftOut, error)
}

func (m *Master) setSnapshot(snap *conf.Snapshot) error {
	data, err := json.Marshal(m.forWorkers(snap))
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	// Before any worker sees snap: workers look up the health entries it needs.
	if m.health != nil {
		m.health.Update(snap)
	}
	m.mu.Lock()
	m.snapshot, m.version, m.leftOut = data, snap.Version, snap.LeftOut
	m.mu.Unlock()
	return nil
}

// loadStored is the stored config as the workers will serve it under cfg. A stored
// object that does not decode or does not build never stops a start: it is left out,
// named in the error log, in `gwctl status` and in the Admin API's answer for it, and
// whatever references it answers as if it were missing. A route left out is a 404, never
// a route without its plugins.
func (m *Master) loadStored(cfg *conf.Config) (*conf.Snapshot, error) {
	snap := m.store.Snapshot()
	if m.checker != nil {
		failed, err := m.checker.Check(snap, cfg)
		if err != nil {
			return nil, err
		}
		snap.LeaveOut(failed)
	}
	for _, l := range snap.LeftOut {
		m.log.Errorf("stored object %s is left out and not served: %s (fix it with a PUT, or DELETE it)", l.Key(), l.Reason)
	}
	return snap, nil
}

// servesUnder refuses a new config.yaml under which a stored object that is served now
// would fail to build (router.http changes how paths parse): the new workers would refuse
// their first snapshot, so the reload is refused first, naming the object.
func (m *Master) servesUnder(cfg *conf.Config) error {
	if m.checker == nil {
		return nil
	}
	failed, err := m.checker.Check(m.store.Snapshot(), cfg)
	if err != nil {
		return err
	}
	before := map[string]bool{}
	for _, l := range m.LeftOut() {
		before[l.Key()] = true
	}
	for _, l := range failed {
		if !before[l.Key()] {
			return fmt.Errorf("%s: under the new configuration %s could not be served: %s", m.paths.Config, l.Key(), l.Reason)
		}
	}
	return nil
}

// Check is the Admin API's Builder: snap built as the workers will build it under the
// config they run.
func (m *Master) Check(snap *conf.Snapshot) ([]conf.LeftOut, error) {
	if m.checker == nil {
		return nil, nil
	}
	return m.checker.Check(snap, m.currentConfig())
}

// LeftOut is the Admin API's Builder: what the snapshot published last leaves out.
func (m *Master) LeftOut() []conf.LeftOut {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leftOut
}

// Publish makes every live worker serve snap and returns once each has acknowledged it.
// A worker that exits meanwhile is not waited for: its replacement starts from the latest
// snapshot before it counts as ready.
func (m *Master) Publish(ctx context.Context, snap *conf.Snapshot) error {
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	if err := m.setSnapshot(snap); err != nil {
		return err
	}
	m.mu.Lock()
	data := m.snapshot
	live := m.sup.serving()
	m.mu.Unlock()
	for _, w := range live {
		w.sendConfig(data)
	}
	var lagging []string
	for _, w := range live {
		if err := w.waitAck(ctx, snap.Version); err != nil {
			lagging = append(lagging, fmt.Sprintf("worker slot %d (pid %d): %v", w.slot, w.pid, err))
		}
	}
	if len(lagging) > 0 {
		return fmt.Errorf("config version %d not acknowledged by %s", snap.Version, strings.Join(lagging, "; "))
	}
	return nil
}

// currentSnapshot is what a newly started worker must load before it counts as ready.
func (m *Master) currentSnapshot() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshot
}
