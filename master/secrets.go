package master

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"gw/conf"
	"gw/plugins"
)

// forWorkers is snap as workers get it: the secret references ($env://NAME) of its
// consumers (plugins.ResolveSecrets) and of its ssls' certificates and keys resolved
// from the master's environment. Workers are given values, never references, and the
// store keeps the references as written, so GET shows what the client sent. A reference
// without a value is logged the first time this master meets it: a consumer's matches no
// request, and an ssl's fails to build, so that ssl is left out (the Admin API refuses
// both at write time; the variable may be gone at a later start). Callers hold
// publishMu, or run before the master serves anything.
func (m *Master) forWorkers(snap *conf.Snapshot) *conf.Snapshot {
	resolved, unresolved := plugins.ResolveSecrets(snap, os.LookupEnv)
	m.warnUnresolved(unresolved)
	sslsCopied := false
	for i := range snap.SSLs {
		ssl, changed := m.resolveSSL(&snap.SSLs[i])
		if !changed {
			continue
		}
		if !sslsCopied {
			if resolved == snap {
				copied := *snap
				resolved = &copied
			}
			resolved.SSLs = slices.Clone(snap.SSLs)
			sslsCopied = true
		}
		resolved.SSLs[i] = *ssl
	}
	return resolved
}

// resolveSSL is ssl with its secret references resolved, and whether that changed it. One
// without a value is logged and stays as written, which fails the ssl's build.
func (m *Master) resolveSSL(ssl *conf.SSL) (*conf.SSL, bool) {
	resolved, err := ssl.ResolveSecrets(os.LookupEnv)
	if err != nil {
		problem := fmt.Sprintf("ssl %s: %v", ssl.ID, err)
		if oe, ok := errors.AsType[*conf.ObjectError](err); ok {
			problem = fmt.Sprintf("ssl %s: %s: %s", ssl.ID, oe.Path, oe.Reason)
		}
		m.warnOnce(problem, problem+": the ssl is left out until the master is started with a value for it")
		// The rest resolved: the worker's build names the reference that is not.
	}
	return resolved, resolved != ssl
}

// deltaForWorkers is d as workers get it: the consumers and ssls it puts with their
// secret references resolved, as forWorkers does for a whole snapshot.
func (m *Master) deltaForWorkers(d *conf.Delta) *conf.Delta {
	var consumers conf.Snapshot
	for i := range d.Changes {
		if c := d.Changes[i].Consumer; c != nil {
			consumers.Consumers = append(consumers.Consumers, *c)
		}
	}
	out := d
	copyOnce := func() {
		if out == d {
			copied := *d
			copied.Changes = slices.Clone(d.Changes)
			out = &copied
		}
	}
	if len(consumers.Consumers) > 0 {
		resolved, unresolved := plugins.ResolveSecrets(&consumers, os.LookupEnv)
		m.warnUnresolved(unresolved)
		copyOnce()
		next := 0
		for i := range out.Changes {
			if out.Changes[i].Consumer != nil {
				out.Changes[i].Consumer = &resolved.Consumers[next]
				next++
			}
		}
	}
	for i := range d.Changes {
		if ssl := d.Changes[i].SSL; ssl != nil {
			if resolved, changed := m.resolveSSL(ssl); changed {
				copyOnce()
				out.Changes[i].SSL = resolved
			}
		}
	}
	return out
}

// warnUnresolved logs each secret reference without a value the first time it is met.
func (m *Master) warnUnresolved(unresolved []string) {
	for _, problem := range unresolved {
		m.warnOnce(problem, problem+": no request can present this credential until the master is started with a value for it")
	}
}

// warnOnce logs message the first time this master meets problem.
func (m *Master) warnOnce(problem, message string) {
	m.secretsMu.Lock()
	defer m.secretsMu.Unlock()
	if m.secretsWarned[problem] {
		return
	}
	if m.secretsWarned == nil {
		m.secretsWarned = map[string]bool{}
	}
	m.secretsWarned[problem] = true
	m.log.Warnf("%s", message)
}
