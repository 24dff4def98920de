package master

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"gw/conf"
	"gw/internal/errlog"
)

// closeTimeout bounds how long a reload waits for an old worker to stop accepting: a
// worker does it as soon as it reads the shutdown frame.
const closeTimeout = 5 * time.Second

// reload re-reads the config file and replaces the worker generation, as nginx's HUP. The
// old generation keeps serving unless the new one is fully ready.
func (m *Master) reload() (err error) {
	defer func() {
		m.mu.Lock()
		if err != nil {
			m.reloadFailures++
		} else {
			m.reloads++
		}
		m.mu.Unlock()
		if err != nil {
			m.log.Errorf("reload failed, the previous configuration keeps serving: %v", err)
		}
	}()
	cfg, err := m.readConfig()
	if err != nil {
		return err
	}
	old := m.sup.current()
	if err := staticChangeAllowed(old.cfg, cfg); err != nil {
		return err
	}
	if err := m.servesUnder(cfg); err != nil {
		return err
	}
	if err := m.prepareWorkerFiles(cfg); err != nil {
		return err
	}
	gen, err := m.newGeneration(cfg, old.id+1)
	if err != nil {
		return err
	}
	if err := m.ensureSockets(gen); err != nil {
		return err
	}
	// The Admin API changes with the workers or not at all: its new listener is bound now,
	// so a taken address fails the reload before anything changes, and put in place only
	// once the new generation serves.
	var nextAdmin *adminChange
	if cfg.Admin.Listen != old.cfg.Admin.Listen || !sameKeys(cfg, old.cfg) {
		if nextAdmin, err = m.prepareAdmin(cfg); err != nil {
			return err
		}
		defer func() {
			if err != nil {
				m.abandonAdmin(nextAdmin)
			}
		}()
	}
	// No publication may slip between the new workers' first snapshot and the swap, nor
	// before the old workers stop accepting: it goes to the new generation only.
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	oldSlots, err := m.sup.replace(gen)
	if err != nil {
		return err
	}
	if nextAdmin != nil {
		m.commitAdmin(nextAdmin)
	}
	// The old workers share the listening sockets with the new ones: until each has closed
	// its copies it may still accept a connection and serve it the old configuration and
	// the old snapshot. gwctl reload waits for this function, so once it returns every new
	// connection gets the new configuration, and read-your-writes holds for the Admin API
	// across a reload. A worker too busy to answer in time is not worth failing a reload
	// that has happened.
	for _, w := range oldSlots {
		if w == nil {
			continue
		}
		if err := w.waitClosed(closeTimeout); err != nil {
			m.log.Warnf("reload: %v; until it does, it may serve new connections the old configuration", err)
		}
	}
	m.closeUnusedSockets()
	m.raiseFileLimit(cfg.WorkerRlimitNofile)
	m.log.SetLevel(errlog.ParseLevel(cfg.ErrorLogLevel))
	m.log.Infof("reloaded: generation %d, %d workers, listening on %s", gen.id, gen.workers, strings.Join(cfg.DataListen(), ", "))
	return nil
}

// staticChangeAllowed refuses what a reload cannot change, as nginx refuses to resize its
// shared zones: segments hold live counters that every worker maps.
func staticChangeAllowed(old, cfg *conf.Config) error {
	if old.Shm != cfg.Shm {
		return fmt.Errorf("shm sizes are fixed at start (shm.limit_count %d → %d, shm.metrics %d → %d, shm.health_check %d → %d, limit_count_on_full %q → %q): restart to change them",
			old.Shm.LimitCount, cfg.Shm.LimitCount, old.Shm.Metrics, cfg.Shm.Metrics, old.Shm.HealthCheck, cfg.Shm.HealthCheck, old.Shm.LimitCountOnFull, cfg.Shm.LimitCountOnFull)
	}
	if old.User != cfg.User {
		return fmt.Errorf("user is fixed at start (%q → %q): restart to change it", old.User, cfg.User)
	}
	if old.DataDir != cfg.DataDir {
		return fmt.Errorf("data_dir is fixed at start (%q → %q): restart to change it", old.DataDir, cfg.DataDir)
	}
	if old.Prometheus != cfg.Prometheus {
		return fmt.Errorf("prometheus settings are fixed at start: restart to change them")
	}
	// The store, its watch and the listeners a role opens are made once, at start.
	if !reflect.DeepEqual(old.Deployment, cfg.Deployment) {
		return fmt.Errorf("the deployment section is fixed at start (role %s → %s, config_provider %s → %s): restart to change it",
			old.Deployment.Role, cfg.Deployment.Role, old.Deployment.ConfigProvider, cfg.Deployment.ConfigProvider)
	}
	if old.Status != cfg.Status {
		return fmt.Errorf("status settings are fixed at start (status.enabled %t → %t, status.listen %s → %s): restart to change them",
			old.Status.Enabled, cfg.Status.Enabled, old.Status.Listen, cfg.Status.Listen)
	}
	return nil
}

func sameKeys(a, b *conf.Config) bool {
	ka, kb := a.AdminKeys(), b.AdminKeys()
	if len(ka) != len(kb) || strings.Join(a.Admin.Allow, ",") != strings.Join(b.Admin.Allow, ",") {
		return false
	}
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}

// newGeneration resolves the worker count (--workers wins over the file) and encodes the
// static config for the workers.
func (m *Master) newGeneration(cfg *conf.Config, id uint64) (*generation, error) {
	workers := cfg.Workers()
	if m.opts.Workers > 0 {
		workers = m.opts.Workers
	}
	if !cfg.Deployment.ServesData() {
		workers = 0 // a control_plane serves the Admin API alone
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return &generation{id: id, cfg: cfg, workers: workers, cfgJSON: cfgJSON}, nil
}
