package plugins

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"gw/conf"
	"gw/shm"
)

// Plugin is the registration record of one plugin. Each plugin package registers itself in
// init(); a duplicate name panics so a bad build fails at start, never at request time.
type Plugin struct {
	// Name is the key under a route's "plugins" object, e.g. "limit-count".
	Name string
	// Priority orders the chain as in APISIX: higher runs first.
	Priority int
	// Validate checks one plugin configuration strictly (unknown fields, types, ranges)
	// and returns an error that names the offending field. It must be pure and fast.
	Validate func(raw json.RawMessage) error
	// Build makes the plugin's instance for one route from a configuration Validate has
	// accepted. Workers call it once per config snapshot per route, never per request.
	// The instance implements AccessPhase, LogPhase or both. Nil means the plugin has no
	// runtime yet: routes may carry its configuration, and nothing runs.
	Build func(raw json.RawMessage, env *Env) (any, error)
	// Segment, when set, asks the master for a shared-memory segment that lives as long
	// as the master and is mapped by every worker (Env.Segments[Name]).
	Segment *SegmentSpec
	// CheckSnapshot, when set, checks a rule that spans objects (limit-count's group: all
	// routes of a group must agree). The Admin API runs it on the snapshot a write would
	// produce, when the written object configures this plugin, and refuses the write.
	CheckSnapshot func(snap *conf.Snapshot) error
	// Auth marks a plugin that names the request's consumer (key-auth, basic-auth). A
	// consumer's configuration of it is a credential, not a route configuration, and is
	// never merged into a route's chain as the consumer's other plugins are.
	Auth bool
	// ConsumerSecrets names the string members of a consumer's configuration of this
	// plugin that may be a secret reference ($env://NAME; see conf.ParseSecretRef). The
	// master resolves them before a snapshot reaches workers (ResolveSecrets); the
	// plugin's consumer validation refuses a reference gw cannot resolve, and its
	// workers never match a member that still reads as a reference.
	ConsumerSecrets []string
	// KeepsRequest promises that the plugin never changes the request sent upstream: its
	// method, target or headers (limit-count and prometheus only count). A route whose
	// plugins all keep it has the client's header block sent as it came, filtered, rather
	// than re-serialised (proxy.Info.Pristine). Leave it false when in doubt: false is
	// always correct, only slower.
	KeepsRequest bool

	// segmentOnly marks a record RegisterSegment made: a segment that belongs to no
	// plugin. Lookup and Names do not see it, so no route can configure it.
	segmentOnly bool
}

// HealthSegment names the upstream health table's segment (shm/health.go): the master's
// checker writes it, every worker reads it and counts live traffic into it.
const HealthSegment = shm.HealthLayoutName

func init() {
	RegisterSegment(HealthSegment, &SegmentSpec{Layout: shm.HealthLayout, Size: healthSegmentSize, Init: shm.InitHealthTable})
}

// defaultHealthSegmentBytes is shm.health_check's default, for a Config that leaves it unset.
const defaultHealthSegmentBytes = 1 << 20

// healthSegmentSize makes the whole segment, header included, the configured size.
func healthSegmentSize(cfg *conf.Config) int {
	total := int64(defaultHealthSegmentBytes)
	if cfg != nil && cfg.Shm.HealthCheck > 0 {
		total = cfg.Shm.HealthCheck
	}
	return int(total-shm.HeaderSize) &^ 7
}

// RegisterSegment asks for a shared-memory segment that belongs to no plugin: the master
// creates it, hands it to every worker and to a new master on upgrade, exactly as a
// plugin's, and workers find it in Shared.Segments[name]. It panics on a name taken.
func RegisterSegment(name string, spec *SegmentSpec) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || spec == nil {
		panic("BUG: plugins: RegisterSegment needs a name and a spec")
	}
	if _, dup := registry[name]; dup {
		panic("BUG: plugins: duplicate registration of " + name)
	}
	registry[name] = Plugin{Name: name, Segment: spec, segmentOnly: true}
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Plugin{}
)

// Register adds p to the registry. It panics on an empty or duplicate name.
func Register(p Plugin) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if p.Name == "" || p.Validate == nil {
		panic("BUG: plugins: Register needs a name and a Validate func")
	}
	if _, dup := registry[p.Name]; dup {
		panic("BUG: plugins: duplicate registration of " + p.Name)
	}
	registry[p.Name] = p
}

// Lookup returns the registered plugin named name.
func Lookup(name string) (Plugin, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	p, ok := registry[name]
	if p.segmentOnly {
		return Plugin{}, false
	}
	return p, ok
}

// Names lists the registered plugins, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n, p := range registry {
		if !p.segmentOnly {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// ValidateAll checks every entry of a "plugins" object. The error wording follows APISIX:
// "unknown plugin [name]" and "failed to check the configuration of plugin NAME err: ...".
func ValidateAll(set map[string]json.RawMessage) error {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p, ok := Lookup(name)
		if !ok {
			return fmt.Errorf("unknown plugin [%s]", name)
		}
		if err := p.Validate(set[name]); err != nil {
			return fmt.Errorf("failed to check the configuration of plugin %s err: %w", name, err)
		}
	}
	return nil
}

// CheckSnapshot runs the cross-object checks of the plugins named in set against snap.
func CheckSnapshot(set map[string]json.RawMessage, snap *conf.Snapshot) error {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if p, ok := Lookup(name); ok && p.CheckSnapshot != nil {
			if err := p.CheckSnapshot(snap); err != nil {
				return fmt.Errorf("failed to check the configuration of plugin %s err: %w", name, err)
			}
		}
	}
	return nil
}
