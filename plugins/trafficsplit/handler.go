package trafficsplit

import (
	"encoding/json"
	"errors"
	"sync"

	"gw/conf"
	"gw/plugins"
)

// Build decodes a route's configuration and starts each rule's rotation. A rule that
// names a stored upstream the snapshot lacks (deleted with ?force=true) fails each
// request it would serve with APISIX's 500.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	c, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	s := &splitter{cfg: c, rules: make([]ruleState, len(c.Rules))}
	var stored map[conf.ID]bool
	if env != nil && env.Snapshot != nil {
		stored = make(map[conf.ID]bool, len(env.Snapshot.Upstreams))
		for i := range env.Snapshot.Upstreams {
			stored[env.Snapshot.Upstreams[i].ID] = true
		}
	}
	for i := range c.Rules {
		r := &c.Rules[i]
		st := &s.rules[i]
		st.rotation.weights = make([]int64, len(r.Weighted))
		st.rotation.current = make([]int64, len(r.Weighted))
		for j, w := range r.Weighted {
			st.rotation.weights[j] = w.Weight
			st.rotation.total += w.Weight
			if id := c.Upstreams[w.Upstream].ID; id != "" && stored != nil && !stored[id] && st.missing == nil {
				st.missing = errors.New("failed to fetch upstream info by upstream id: " + string(id))
			}
		}
	}
	return s, nil
}

// splitter is one route's traffic-split: its configuration and each rule's rotation.
type splitter struct {
	cfg   *Config
	rules []ruleState
}

// ruleState is one rule's rotation, and the error of a rule that names a missing
// upstream.
type ruleState struct {
	rotation rotation
	missing  error
}

var (
	_ plugins.AccessPhase     = (*splitter)(nil)
	_ plugins.UpstreamChooser = (*splitter)(nil)
)

// Upstreams is every upstream the configuration names, for the host to compile.
func (s *splitter) Upstreams() []plugins.UpstreamRef { return s.cfg.Upstreams }

// Access finds the first rule that matches and names its next upstream to the host, as
// APISIX's access does: a request no rule matches, or whose rule's weights are all 0,
// goes to the route's own upstream.
func (s *splitter) Access(c *plugins.Ctx) error {
	for i := range s.cfg.Rules {
		r := &s.cfg.Rules[i]
		st := &s.rules[i]
		if st.missing != nil {
			return st.missing
		}
		if !matches(c, r) {
			continue
		}
		if pick := st.rotation.next(); pick >= 0 {
			c.UseUpstream(s, r.Weighted[pick].Upstream)
		}
		return nil
	}
	return nil
}

// matches reports whether any of r's match items holds; a rule without match always
// matches.
func matches(c *plugins.Ctx, r *Rule) bool {
	if !r.HasMatch || len(r.Match) == 0 {
		return true
	}
	for _, e := range r.Match {
		if e == nil || c.Holds(e) {
			return true
		}
	}
	return false
}

// rotation is smooth weighted round robin (nginx's): each pick adds every weight to its
// entry's current value and takes the largest, which then gives back the total. Weights
// 5, 1, 1 give a a b a c a a, never a burst of one upstream while the others wait. Safe
// for concurrent use: one pick is a few additions under a mutex.
type rotation struct {
	mu      sync.Mutex
	weights []int64
	current []int64
	total   int64
}

// next returns the index of the next pick, -1 when every weight is 0.
func (r *rotation) next() int {
	if r.total == 0 {
		return -1
	}
	r.mu.Lock()
	best := -1
	for i, w := range r.weights {
		if w == 0 {
			continue
		}
		r.current[i] += w
		if best < 0 || r.current[i] > r.current[best] {
			best = i
		}
	}
	r.current[best] -= r.total
	r.mu.Unlock()
	return best
}
