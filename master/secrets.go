package master

import (
	"os"

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
	return resolved
}
