package limitcount

import (
	"fmt"
	"sort"
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
	b.WriteString("count=" + strconv.FormatInt(c.Count, 10))
	b.WriteString(";time_window=" + strconv.FormatInt(c.TimeWindow, 10))
	b.WriteString(";key_type=" + strconv.Quote(c.KeyType))
	b.WriteString(";key=" + strconv.Quote(c.Key))
	b.WriteString(";rejected_code=" + strconv.Itoa(c.RejectedCode))
	b.WriteString(";rejected_msg=" + strconv.Quote(c.RejectedMsg))
	b.WriteString(";policy=" + strconv.Quote(c.Policy))
	b.WriteString(";allow_degradation=" + strconv.FormatBool(c.AllowDegradation))
	b.WriteString(";show_limit_quota_header=" + strconv.FormatBool(c.ShowLimitQuotaHeader))
	b.WriteString(";group=" + strconv.Quote(c.Group))
	b.WriteString(";window_type=" + strconv.Quote(c.WindowType))
	b.WriteString(c.canonicalRedis())
	return b.String()
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

// CheckGroups reports, in APISIX's words, a group whose routes configure limit-count
// differently. The Admin API can call it on the snapshot a write would produce, to answer
// 400 before storing; the workers enforce the same rule when they build (the routes of a
// mismatched group answer 500).
func CheckGroups(snap *conf.Snapshot) error {
	byGroup := indexGroups(snap)
	names := make([]string, 0, len(byGroup))
	for g := range byGroup {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		entries := byGroup[g]
		for _, e := range entries[1:] {
			if e.canonical != entries[0].canonical {
				return fmt.Errorf("group conf mismatched: group %q is configured differently on routes %s and %s", g, entries[0].route, e.route)
			}
		}
	}
	return nil
}
