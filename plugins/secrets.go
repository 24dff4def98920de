package plugins

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"gw/conf"
)

// ResolveSecrets returns snap as workers must get it: each secret reference in a
// consumer's credentials (the members its auth plugins list in SecretFields) replaced by
// its value, which lookup gives (the master passes os.LookupEnv). A reference without a
// value stays as written, which the plugins match to no request, and is described in
// unresolved, for the master's log. snap is not modified: what changes is copied, so the
// store's objects, which GET returns, keep the references as the client wrote them.
func ResolveSecrets(snap *conf.Snapshot, lookup func(string) (string, bool)) (resolved *conf.Snapshot, unresolved []string) {
	resolved = snap
	for i := range snap.Consumers {
		c := &snap.Consumers[i]
		var plugins map[string]json.RawMessage // c.Plugins, copied on the first change
		for _, name := range slices.Sorted(maps.Keys(c.Plugins)) {
			p, _ := Lookup(name)
			auth, ok := p.(ConsumerAuth)
			if !ok || len(auth.SecretFields()) == 0 {
				continue
			}
			raw, missing := resolveMembers(c.Plugins[name], auth.SecretFields(), lookup)
			for _, m := range missing {
				unresolved = append(unresolved, fmt.Sprintf("consumer %q: %s.%s", c.Username, name, m))
			}
			if raw == nil {
				continue
			}
			if plugins == nil {
				plugins = maps.Clone(c.Plugins)
			}
			plugins[name] = raw
		}
		if plugins == nil {
			continue
		}
		if resolved == snap {
			copied := *snap
			copied.Consumers = slices.Clone(snap.Consumers)
			resolved = &copied
		}
		resolved.Consumers[i].Plugins = plugins
	}
	return resolved, unresolved
}

// resolveMembers resolves the named string members of one plugin configuration. It
// returns the configuration re-encoded, nil when nothing was resolved, and a description
// of each reference that has no value. A configuration that is not an object is left to
// the plugin's own parsing, which refuses it.
func resolveMembers(raw json.RawMessage, names []string, lookup func(string) (string, bool)) (json.RawMessage, []string) {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return nil, nil
	}
	var missing []string
	changed := false
	for _, name := range names {
		var text string
		if json.Unmarshal(members[name], &text) != nil {
			continue
		}
		ref, isRef, err := conf.ParseSecretRef(text)
		switch {
		case !isRef:
			continue
		case err != nil: // the Admin API refuses these; a hand-edited store may hold one
			missing = append(missing, name+": "+err.Error())
			continue
		}
		value, ok := ref.Resolve(lookup)
		if !ok {
			missing = append(missing, name+": "+ref.String()+" has no value (unset, empty, or without that member)")
			continue
		}
		encoded, err := json.Marshal(value)
		if err != nil {
			panic("BUG: plugins: encoding a string: " + err.Error())
		}
		members[name] = encoded
		changed = true
	}
	if !changed {
		return nil, missing
	}
	encoded, err := json.Marshal(members)
	if err != nil {
		panic("BUG: plugins: encoding decoded members: " + err.Error())
	}
	return encoded, missing
}
