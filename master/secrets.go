package master

import (
	"os"
	"slices"

	"gw/conf"
	"gw/plugins"
)

// forWorkers is snap as workers get it: its consumers' secret references ($env://NAME)
// resolved from the master's environment (plugins.ResolveSecrets). Workers are given
// values, never references, and the store keeps the references as written, so GET shows
// what the client sent. A reference without a value is logged the first time this master
// meets it; it matches no request. Callers hold publishMu, or run before the master
// serves anything.
func (m *Master) forWorkers(snap *conf.Snapshot) *conf.Snapshot {
	resolved, unresolved := plugins.ResolveSecrets(snap, os.LookupEnv)
	m.warnUnresolved(unresolved)
	return resolved
}

// deltaForWorkers is d as workers get it: the consumers it puts with their secret
// references resolved, as forWorkers does for a whole snapshot.
func (m *Master) deltaForWorkers(d *conf.Delta) *conf.Delta {
	var consumers conf.Snapshot
	for i := range d.Changes {
		if c := d.Changes[i].Consumer; c != nil {
			consumers.Consumers = append(consumers.Consumers, *c)
		}
	}
	if len(consumers.Consumers) == 0 {
		return d
	}
	resolved, unresolved := plugins.ResolveSecrets(&consumers, os.LookupEnv)
	m.warnUnresolved(unresolved)
	out := *d
	out.Changes = slices.Clone(d.Changes)
	next := 0
	for i := range out.Changes {
		if out.Changes[i].Consumer != nil {
			out.Changes[i].Consumer = &resolved.Consumers[next]
			next++
		}
	}
	return &out
}

// warnUnresolved logs each secret reference without a value the first time it is met.
func (m *Master) warnUnresolved(unresolved []string) {
	m.secretsMu.Lock()
	defer m.secretsMu.Unlock()
	for _, problem := range unresolved {
		if m.secretsWarned[problem] {
			continue
		}
		if m.secretsWarned == nil {
			m.secretsWarned = map[string]bool{}
		}
		m.secretsWarned[problem] = true
		m.log.Warnf("%s: no request can present this credential until the master is started with a value for it", problem)
	}
}
