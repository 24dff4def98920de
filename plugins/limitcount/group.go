package limitcount

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gw/conf"
)

// canonical is the configuration as text, for the counter key and for comparing a group's
// configurations. It lists fields by name rather than marshalling the struct so that it
// never changes across binaries: counters must survive a binary upgrade. A field added
// later must be appended only when it differs from its default.
func (c *Config) canonical() string {
	var b strings.Builder
	for i, s := range c.settings() {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(s.name + "=" + s.value)
	}
	return b.String()
}

// setting is one field of canonical: its name and its value as text.
type setting struct{ name, value string }

// settings are the fields canonical is made of, in its order.
func (c *Config) settings() []setting {
	return append([]setting{
		{"count", strconv.FormatInt(c.Count, 10)},
		{"time_window", strconv.FormatInt(c.TimeWindow, 10)},
		{"key_type", strconv.Quote(c.KeyType)},
		{"key", strconv.Quote(c.Key)},
		{"rejected_code", strconv.Itoa(c.RejectedCode)},
		{"rejected_msg", strconv.Quote(c.RejectedMsg)},
		{"policy", strconv.Quote(c.Policy)},
		{"allow_degradation", strconv.FormatBool(c.AllowDegradation)},
		{"show_limit_quota_header", strconv.FormatBool(c.ShowLimitQuotaHeader)},
		{"group", strconv.Quote(c.Group)},
		{"window_type", strconv.Quote(c.WindowType)},
	}, c.redisSettings()...)
}

// difference is the first setting in which c and other differ, as c has it and as other
// has it ("count 2", "count 1"); differ is false when they agree in every one.
func (c *Config) difference(other *Config) (inC, inOther string, differ bool) {
	a, b := c.settings(), other.settings()
	for i := range a {
		if a[i].value != b[i].value {
			return a[i].name + " " + a[i].value, b[i].name + " " + b[i].value, true
		}
	}
	return "", "", false
}

// groupEntry is one route's limit-count configuration in a group.
type groupEntry struct {
	route     string
	canonical string
}

// indexGroups lists the enabled routes' limit-count configurations by group, taking a
// route's own configuration over its service's as the worker does.
func indexGroups(snap *conf.Snapshot) groups {
	byGroup := groups{}
	if snap == nil {
		return byGroup
	}
	services := make(map[conf.ID]*conf.Service, len(snap.Services))
	for i := range snap.Services {
		services[snap.Services[i].ID] = &snap.Services[i]
	}
	for i := range snap.Routes {
		r := &snap.Routes[i]
		if !r.Enabled() {
			continue
		}
		raw, ok := r.Plugins[Name]
		if !ok && r.ServiceID != "" && services[r.ServiceID] != nil {
			raw, ok = services[r.ServiceID].Plugins[Name]
		}
		if !ok {
			continue
		}
		cfg, err := Parse(raw)
		if err != nil || cfg.Disable || cfg.Group == "" {
			continue
		}
		byGroup[cfg.Group] = append(byGroup[cfg.Group], groupEntry{route: string(r.ID), canonical: cfg.canonical()})
	}
	return byGroup
}

// groups are a snapshot's limit-count configurations by group: built once per snapshot
// (BuildSnapshot), however many routes ask, and never changed after.
type groups map[string][]groupEntry

// mismatch reports a route of cfg's group configured differently, if any.
func (g groups) mismatch(cfg *Config) (otherRoute string, mismatched bool) {
	mine := cfg.canonical()
	for _, e := range g[cfg.Group] {
		if e.canonical != mine {
			return e.route, true
		}
	}
	return "", false
}

// CheckWrite holds a group to one configuration, as APISIX's check_schema does with
// "group conf mismatched": the configuration raw that object ("routes/1") is written with
// must be the one every stored object naming its group has, the object's own previous
// version included. APISIX compares with the first configuration it saw of the group,
// cached for some minutes in the process that checks; the stored objects are that
// configuration without the cache, so re-PUTting an object with its group and another
// count is refused as in APISIX's t/plugin/limit-count2.t TEST 19, and so is always, not
// for a while. Objects that merely inherit a configuration (a route of a service) do not
// name a group themselves and are not compared; a disabled configuration is, as in
// APISIX.
func (plugin) CheckWrite(stored *conf.Snapshot, object string, raw json.RawMessage) error {
	cfg, err := Parse(raw)
	if err != nil || cfg.Group == "" {
		return nil // Validate has reported err
	}
	for _, m := range groupMembers(stored, cfg.Group) {
		stored, written, differ := m.config.difference(cfg)
		if !differ {
			continue
		}
		who := m.object
		if who == object {
			who += " as stored"
		}
		return fmt.Errorf("group conf mismatched: %s configures group %q with %s, this configuration has %s; "+
			"every object of a group must configure limit-count the same (to change a group's limits, give it a new name)",
			who, cfg.Group, stored, written)
	}
	return nil
}

// member is one object that configures limit-count with a group.
type member struct {
	object string // "kind/id"
	config *Config
}

// groupMembers lists the objects of snap whose own limit-count configuration names group,
// enabled or not, in the order of the snapshot's lists.
func groupMembers(snap *conf.Snapshot, group string) []member {
	if snap == nil {
		return nil
	}
	var members []member
	add := func(object string, set map[string]json.RawMessage) {
		raw, ok := set[Name]
		if !ok {
			return
		}
		if cfg, err := Parse(raw); err == nil && cfg.Group == group {
			members = append(members, member{object, cfg})
		}
	}
	for i := range snap.Routes {
		add("routes/"+string(snap.Routes[i].ID), snap.Routes[i].Plugins)
	}
	for i := range snap.Services {
		add("services/"+string(snap.Services[i].ID), snap.Services[i].Plugins)
	}
	for i := range snap.PluginConfigs {
		add("plugin_configs/"+string(snap.PluginConfigs[i].ID), snap.PluginConfigs[i].Plugins)
	}
	for i := range snap.GlobalRules {
		add("global_rules/"+string(snap.GlobalRules[i].ID), snap.GlobalRules[i].Plugins)
	}
	for i := range snap.Consumers {
		add("consumers/"+snap.Consumers[i].Username, snap.Consumers[i].Plugins)
	}
	return members
}
