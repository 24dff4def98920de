package master

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"gw/conf"
)

// SnapshotChecker builds snapshots as the workers will under cfg and returns the objects
// that fail to build (worker.Checker). Check builds a whole snapshot; CheckDelta builds
// the snapshot it holds (the last Reset or Commit) with d applied, and changes nothing;
// Commit makes that the snapshot it holds.
type SnapshotChecker interface {
	Check(snap *conf.Snapshot, cfg *conf.Config) ([]conf.LeftOut, error)
	Reset(snap *conf.Snapshot)
	CheckDelta(d *conf.Delta, cfg *conf.Config) ([]conf.LeftOut, error)
	Commit(d *conf.Delta, cfg *conf.Config)
}

// setSnapshot makes snap, whole, what every worker is to serve: the start's, with the
// stored objects checked. Later writes come as deltas (Publish).
func (m *Master) setSnapshot(snap *conf.Snapshot) error {
	forWorkers := m.forWorkers(snap)
	data, err := json.Marshal(forWorkers)
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	m.certs.reset(forWorkers.SSLs, m.log.Warnf)
	// Before any worker sees snap: workers look up the health entries it needs.
	if m.health != nil {
		m.health.Update(snap)
		m.healthChecked = checkedNames(snap)
	}
	if m.checker != nil {
		m.checker.Reset(forWorkers) // the checker builds what workers build: secrets resolved
	}
	m.mu.Lock()
	m.snapshot, m.version, m.leftOut = data, snap.Version, snap.LeftOut
	m.mu.Unlock()
	return nil
}

// checkedNames are the health checker's names (conf.CheckedUpstream.Name) of snap's
// health-checked upstreams.
func checkedNames(snap *conf.Snapshot) map[string]bool {
	names := map[string]bool{}
	for _, cu := range snap.CheckedUpstreams() {
		names[cu.Name] = true
	}
	return names
}

// touchesHealthChecks reports whether d changes an upstream that is, or is to be, health
// checked: the checker then needs the whole new snapshot.
func (m *Master) touchesHealthChecks(d *conf.Delta) bool {
	for i := range d.Changes {
		c := &d.Changes[i]
		name := "/apisix/" + c.Kind + "/" + string(c.ID)
		if m.healthChecked[name] {
			return true
		}
		switch {
		case c.Upstream != nil && c.Upstream.HealthChecked(),
			c.Route != nil && c.Route.Upstream != nil && c.Route.Upstream.HealthChecked(),
			c.Service != nil && c.Service.Upstream != nil && c.Service.Upstream.HealthChecked():
			return true
		}
	}
	return false
}

// loadStored is the stored config as the workers will serve it under cfg. A stored
// object that does not decode or does not build never stops a start: it is left out,
// named in the error log, in `gwctl status` and in the Admin API's answer for it, and
// whatever references it answers as if it were missing. A route left out is a 404, never
// a route without its plugins.
func (m *Master) loadStored(cfg *conf.Config) (*conf.Snapshot, error) {
	snap := m.store.Snapshot()
	if m.checker != nil {
		failed, err := m.checker.Check(m.forWorkers(snap), cfg)
		if err != nil {
			return nil, err
		}
		snap.LeaveOut(failed)
	}
	for _, l := range snap.LeftOut {
		m.log.Errorf("stored object %s is left out and not served: %s (%s)", l.Key(), l.Reason, m.fixAdvice())
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
	failed, err := m.checker.Check(m.forWorkers(m.store.Snapshot()), cfg)
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

// Check is the Admin API's Builder: what the workers serve now with d applied, built as
// they will build it under the config they run.
func (m *Master) Check(d *conf.Delta) ([]conf.LeftOut, error) {
	if m.checker == nil {
		return nil, nil
	}
	// On etcd the watch publishes while the Admin API checks: one at a time.
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	return m.checker.CheckDelta(m.deltaForWorkers(d), m.currentConfig())
}

// fixAdvice says how a user mends an object left out: where the objects come from.
func (m *Master) fixAdvice() string {
	if m.file != nil {
		return "fix it in " + m.file.path
	}
	return "fix it with a PUT, or DELETE it"
}

// LeftOut is the Admin API's Builder: what the snapshot published last leaves out.
func (m *Master) LeftOut() []conf.LeftOut {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leftOut
}

// Publish makes every live worker serve d, the write just stored, and returns once each
// has acknowledged it. A worker that serves the version before d gets d alone; any other
// gets the whole snapshot. A worker that exits meanwhile is not waited for: its
// replacement starts from the latest snapshot before it counts as ready.
func (m *Master) Publish(ctx context.Context, d *conf.Delta) error {
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	m.mu.Lock()
	d.From = m.version
	m.mu.Unlock()
	resolved := m.deltaForWorkers(d)
	if m.checker != nil {
		m.checker.Commit(resolved, m.currentConfig())
	}
	forWorkers, err := json.Marshal(resolved)
	if err != nil {
		return fmt.Errorf("encoding config version %d: %w", d.To, err)
	}
	m.certs.apply(resolved.Changes, m.log.Warnf)
	if m.health != nil && m.touchesHealthChecks(d) {
		// Before any worker sees d: workers look up the health entries it needs.
		snap := m.storedSnapshot(d.To, d.LeftOut)
		m.health.Update(snap)
		m.healthChecked = checkedNames(snap)
	}
	m.mu.Lock()
	// The whole snapshot is encoded again only when a worker needs it (currentSnapshot).
	m.snapshot, m.version, m.leftOut = nil, d.To, d.LeftOut
	live := m.sup.serving()
	m.mu.Unlock()
	for _, w := range live {
		if w.ackedVersion() == d.From {
			w.sendDelta(forWorkers)
		} else {
			w.sendConfig(m.currentSnapshot())
		}
	}
	var lagging []string
	for _, w := range live {
		if err := w.waitAck(ctx, d.To); err != nil {
			lagging = append(lagging, fmt.Sprintf("worker slot %d (pid %d): %v", w.slot, w.pid, err))
		}
	}
	if len(lagging) > 0 {
		return fmt.Errorf("config version %d not acknowledged by %s", d.To, strings.Join(lagging, "; "))
	}
	return nil
}

// storedSnapshot is the store as the workers serve it at version, leaving out leftOut.
// It may hold a write stored since version and not yet published: a worker given it
// then gets that write's delta too, which changes nothing it does not already have.
func (m *Master) storedSnapshot(version uint64, leftOut []conf.LeftOut) *conf.Snapshot {
	snap := m.store.Snapshot()
	failed := snap.LeftOut
	snap.LeftOut = nil
	snap.LeaveOut(leftOut)
	for _, l := range failed {
		if !snap.IsLeftOut(l.Kind, l.ID) {
			snap.LeftOut = append(snap.LeftOut, l) // decodes no longer; stays out
		}
	}
	snap.Version = version
	return snap
}

// currentSnapshot is what a newly started worker, or one that missed a delta, must load:
// the whole snapshot of the latest version, encoded once per version.
func (m *Master) currentSnapshot() []byte {
	m.mu.Lock()
	data, version, leftOut := m.snapshot, m.version, m.leftOut
	m.mu.Unlock()
	if data != nil {
		return data
	}
	data, err := json.Marshal(m.forWorkers(m.storedSnapshot(version, leftOut)))
	if err != nil {
		panic(fmt.Sprintf("BUG: master: encoding a stored snapshot: %v", err))
	}
	m.mu.Lock()
	if m.version == version {
		m.snapshot = data
	}
	m.mu.Unlock()
	return data
}
