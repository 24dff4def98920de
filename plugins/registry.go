package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"gw/conf"
)

var (
	registryMu sync.RWMutex
	registry   = map[string]Plugin{}
)

// Register adds p to the registry; each plugin package calls it in init(). It panics on
// a nil plugin, an empty name, a name taken by another plugin or by a segment of the
// host's (RegisterSegment), or a segment without its spec, so that a bad build fails at
// start, never at request time.
func Register(p Plugin) {
	if p == nil || p.Name() == "" {
		panic("BUG: plugins: Register needs a plugin with a name")
	}
	name := p.Name()
	if so, ok := p.(SegmentOwner); ok {
		if spec := so.Segment(); spec == nil || spec.Size == nil {
			panic("BUG: plugins: " + name + " owns a segment without a spec and its Size")
		}
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("BUG: plugins: duplicate registration of " + name)
	}
	if _, taken := hostSegments[name]; taken {
		panic("BUG: plugins: " + name + " is the name of a host segment")
	}
	registry[name] = p
}

// Lookup returns the registered plugin named name.
func Lookup(name string) (Plugin, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	p, ok := registry[name]
	return p, ok
}

// Names lists the registered plugins, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// registered returns every plugin, in name order, for the host's walks over one
// capability.
func registered() []Plugin {
	names := Names()
	list := make([]Plugin, 0, len(names))
	for _, n := range names {
		p, _ := Lookup(n)
		list = append(list, p)
	}
	return list
}

// IsAuth reports whether name is a registered authentication plugin (ConsumerAuth),
// whose configuration on a consumer is a credential rather than a plugin to merge.
func IsAuth(name string) bool {
	p, ok := Lookup(name)
	if !ok {
		return false
	}
	_, auth := p.(ConsumerAuth)
	return auth
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
			return UnknownPlugin(name)
		}
		if err := p.Validate(set[name]); err != nil {
			return fmt.Errorf("failed to check the configuration of plugin %s err: %w", name, err)
		}
	}
	return nil
}

// ChecksSnapshot reports whether a plugin named in set has a rule that spans objects
// (SnapshotChecker), so that a write configuring it needs CheckWrite.
func ChecksSnapshot(set map[string]json.RawMessage) bool {
	for name := range set {
		if p, ok := Lookup(name); ok {
			if _, checks := p.(SnapshotChecker); checks {
				return true
			}
		}
	}
	return false
}

// CheckWrite runs the cross-object rules (SnapshotChecker) of the plugins named in set,
// the plugins of the object written as object ("routes/1"), against stored, the config
// before the write. The error is in APISIX's words, as ValidateAll's.
func CheckWrite(set map[string]json.RawMessage, stored *conf.Snapshot, object string) error {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p, _ := Lookup(name)
		if checker, ok := p.(SnapshotChecker); ok {
			if err := checker.CheckWrite(stored, object, set[name]); err != nil {
				return fmt.Errorf("failed to check the configuration of plugin %s err: %w", name, err)
			}
		}
	}
	return nil
}

// UnknownPlugin is the error for a plugin name gw does not have. It starts with APISIX's
// own words, "unknown plugin [name]", which scripts match, and then lists the plugins
// there are, so a typo or a plugin gw lacks is plain at once.
func UnknownPlugin(name string) error {
	return fmt.Errorf("unknown plugin [%s]; the plugins gw has are %s", name, strings.Join(Names(), ", "))
}

// ValidateMetadata checks plugin name's plugin_metadata as the Admin API does, in
// APISIX's words: an unknown plugin is "invalid plugin name", one without metadata (no
// MetadataOwner) "no metadata schema for plugin <name>".
func ValidateMetadata(name string, raw json.RawMessage) error {
	p, ok := Lookup(name)
	if !ok {
		return errors.New("invalid plugin name")
	}
	owner, ok := p.(MetadataOwner)
	if !ok {
		return errors.New("no metadata schema for plugin " + name)
	}
	return owner.ValidateMetadata(raw)
}
