package trafficsplit

import (
	"encoding/json"
	"errors"
	"fmt"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "traffic-split"

// Priority places traffic-split in the chain as APISIX does (higher runs first): after
// authentication, rewriting and limiting, so that the request is split as they leave it.
const Priority = 966

// maxWeightedUpstreams is APISIX's maxItems of weighted_upstreams.
const maxWeightedUpstreams = 20

// maxWeight bounds a weight so that the round robin's sums never overflow.
const maxWeight = 1 << 31

func init() { plugins.Register(plugin{}) }

// plugin is traffic-split as the host sees it; its instance is a splitter (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

var _ plugins.UpstreamReferrer = plugin{}

// UpstreamIDs are the stored upstreams the configuration names (upstream_id).
func (plugin) UpstreamIDs(raw json.RawMessage) []conf.ID {
	c, err := Parse(raw)
	if err != nil {
		return nil
	}
	var ids []conf.ID
	for _, ref := range c.Upstreams {
		if ref.ID != "" {
			ids = append(ids, ref.ID)
		}
	}
	return ids
}

// Config is one traffic-split configuration, decoded. It is immutable once Parse returns
// it.
type Config struct {
	Rules []Rule
	// Upstreams are every weighted upstream of every rule, in order: the set the host
	// compiles (plugins.UpstreamChooser); a Weighted's Upstream indexes it.
	Upstreams []plugins.UpstreamRef
}

// Rule is one of rules.
type Rule struct {
	// Match are the match items' vars, any of which must hold; nil means the rule always
	// matches. A nil expression (vars missing or empty) always holds.
	Match    []*conf.Expr
	HasMatch bool
	Weighted []Weighted
}

// Weighted is one of a rule's weighted_upstreams.
type Weighted struct {
	// Upstream indexes Config.Upstreams.
	Upstream int
	Weight   int64
}

// Parse decodes one traffic-split configuration strictly, as APISIX's schema and its
// check of the vars expressions. The error names the offending field and value.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Compact.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	for _, m := range members {
		switch m.Name {
		case "rules":
			err = c.parseRules(m.Value)
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: rules", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Config) parseRules(raw json.RawMessage) error {
	var rules []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &rules) != nil {
		return fmt.Errorf("rules: must be an array, got %s", pluginconf.Compact.Show(raw))
	}
	for i, r := range rules {
		path := fmt.Sprintf("rules[%d]", i)
		members, err := pluginconf.Compact.Members(r)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rule := Rule{}
		weightedSeen := false
		for _, m := range members {
			switch m.Name {
			case "match":
				rule.HasMatch = true
				rule.Match, err = parseMatch(path+".match", m.Value)
			case "weighted_upstreams":
				weightedSeen = true
				rule.Weighted, err = c.parseWeighted(path+".weighted_upstreams", m.Value)
			default:
				err = fmt.Errorf("%s.%s: unknown field; known fields: match, weighted_upstreams", path, m.Name)
			}
			if err != nil {
				return err
			}
		}
		if !weightedSeen {
			// APISIX's default: [{"weight": 1}], the route's own upstream.
			rule.Weighted = []Weighted{{Upstream: len(c.Upstreams), Weight: 1}}
			c.Upstreams = append(c.Upstreams, plugins.UpstreamRef{})
		}
		c.Rules = append(c.Rules, rule)
	}
	return nil
}

// parseMatch reads a rule's match: an array of objects, each with vars, a route vars
// expression (conf.ParseVars).
func parseMatch(path string, raw json.RawMessage) ([]*conf.Expr, error) {
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, fmt.Errorf("%s: must be an array, got %s", path, pluginconf.Compact.Show(raw))
	}
	exprs := make([]*conf.Expr, 0, len(items))
	for i, item := range items {
		itemPath := fmt.Sprintf("%s[%d]", path, i)
		members, err := pluginconf.Compact.Members(item)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", itemPath, err)
		}
		var e *conf.Expr
		for _, m := range members {
			if m.Name != "vars" {
				return nil, fmt.Errorf("%s.%s: unknown field; known fields: vars", itemPath, m.Name)
			}
			if len(m.Value) == 0 || m.Value[0] != '[' {
				return nil, fmt.Errorf("%s.vars: must be an array, got %s", itemPath, m.Show())
			}
			if e, err = conf.ParseVars(m.Value); err != nil {
				return nil, fmt.Errorf("%s.vars: failed to validate the 'vars' expression: %v", itemPath, err)
			}
		}
		exprs = append(exprs, e)
	}
	return exprs, nil
}

// parseWeighted reads a rule's weighted_upstreams: 1 to 20 objects, each with an
// upstream_id, an inline upstream, or neither (the route's own), and a weight.
func (c *Config) parseWeighted(path string, raw json.RawMessage) ([]Weighted, error) {
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, fmt.Errorf("%s: must be an array, got %s", path, pluginconf.Compact.Show(raw))
	}
	if len(items) < 1 || len(items) > maxWeightedUpstreams {
		return nil, fmt.Errorf("%s: must hold 1 to %d upstreams, got %d", path, maxWeightedUpstreams, len(items))
	}
	list := make([]Weighted, 0, len(items))
	for i, item := range items {
		itemPath := fmt.Sprintf("%s[%d]", path, i)
		members, err := pluginconf.Compact.Members(item)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", itemPath, err)
		}
		w := Weighted{Upstream: len(c.Upstreams), Weight: 1}
		var ref plugins.UpstreamRef
		for _, m := range members {
			switch m.Name {
			case "upstream_id":
				if err = json.Unmarshal(m.Value, &ref.ID); err != nil || ref.ID == "" {
					err = fmt.Errorf("%s.upstream_id: must be an id (1-64 characters from [a-zA-Z0-9-_.], or a positive integer), got %s", itemPath, m.Show())
				}
			case "upstream":
				ref.Upstream, err = parseUpstream(itemPath+".upstream", m.Value)
			case "weight":
				w.Weight, err = m.IntIn(0, maxWeight)
				if err != nil {
					err = fmt.Errorf("%s.%w", itemPath, err)
				}
			default:
				err = fmt.Errorf("%s.%s: unknown field; known fields: upstream_id, upstream, weight", itemPath, m.Name)
			}
			if err != nil {
				return nil, err
			}
		}
		if ref.ID != "" && ref.Upstream != nil {
			return nil, fmt.Errorf("%s: set upstream_id or upstream, not both", itemPath)
		}
		c.Upstreams = append(c.Upstreams, ref)
		list = append(list, w)
	}
	return list, nil
}

// parseUpstream decodes an inline upstream as the Admin API decodes a route's. Health
// checks and a client certificate by ssl id are refused: the master's checker probes
// only stored upstreams and those of routes and services, and only those have their
// client_cert_id resolved; a stored upstream (upstream_id) has both.
func parseUpstream(path string, raw json.RawMessage) (*conf.Upstream, error) {
	u, err := conf.DecodeUpstream(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if u.Checks != nil {
		return nil, errors.New(path + ".checks: is not supported in traffic-split's inline upstream yet; name a stored upstream with upstream_id")
	}
	if u.TLS != nil && u.TLS.ClientCertID != "" {
		return nil, errors.New(path + ".tls.client_cert_id: is not supported in traffic-split's inline upstream yet; name a stored upstream with upstream_id")
	}
	return u, nil
}
