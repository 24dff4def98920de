package uriblocker

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "uri-blocker"

// Priority places uri-blocker in the chain as APISIX does (higher runs first): after
// ip-restriction, before authentication.
const Priority = 2900

func init() { plugins.Register(plugin{}) }

// plugin is uri-blocker as the host sees it; its instance is the route's Config
// (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is one uri-blocker configuration, compiled. It is immutable once Parse returns
// it and safe to share between goroutines.
type Config struct {
	// Blocked is every rule joined with '|' (and "(?i)" first when case_insensitive), as
	// APISIX joins them: one regexp, one pass over the request's URI.
	Blocked *regexp.Regexp
	// RejectedCode is the status of a refusal; RejectedBody is {"error_msg": rejected_msg},
	// or nil without rejected_msg (an empty body).
	RejectedCode int
	RejectedBody []byte
}

// Parse decodes one uri-blocker configuration strictly, applies APISIX's defaults and
// compiles the rules. The error names the offending field.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{RejectedCode: 403}
	var rules []string
	caseInsensitive := false
	for _, m := range members {
		switch m.Name {
		case "block_rules":
			rules, err = parseRules(m)
		case "rejected_code":
			var code int64
			code, err = m.IntIn(200, 599)
			c.RejectedCode = int(code)
		case "rejected_msg":
			var msg string
			if msg, err = m.NonEmptyString(); err == nil {
				c.RejectedBody, _ = json.Marshal(struct {
					ErrorMsg string `json:"error_msg"`
				}{msg})
				c.RejectedBody = append(c.RejectedBody, '\n')
			}
		case "case_insensitive":
			caseInsensitive, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: block_rules, rejected_code, rejected_msg, case_insensitive", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if rules == nil {
		return nil, errors.New("block_rules: is required (the regular expressions of the URIs to refuse)")
	}
	joined := strings.Join(rules, "|")
	if caseInsensitive {
		joined = "(?i)" + joined
	}
	// An empty array blocks nothing, as in APISIX (where the empty pattern would match
	// every URI, but its schema lets [] through and its rewrite joins nothing into "").
	if len(rules) > 0 {
		if c.Blocked, err = regexp.Compile(joined); err != nil {
			return nil, fmt.Errorf("block_rules: the rules joined with '|' do not compile: %v", err)
		}
	}
	return c, nil
}

// parseRules reads block_rules: distinct strings of 1 to 4096 bytes, each a regular
// expression RE2 compiles.
func parseRules(m pluginconf.Member) ([]string, error) {
	rules, err := m.StringList(0)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for i, rule := range rules {
		if rule == "" || len(rule) > 4096 {
			return nil, fmt.Errorf("block_rules: item %d: must be 1 to 4096 characters, got %d", i+1, len(rule))
		}
		if first, dup := seen[rule]; dup {
			return nil, fmt.Errorf("block_rules: items %d and %d are both %q; give each rule once", first, i+1, rule)
		}
		seen[rule] = i + 1
		if _, err := regexp.Compile(rule); err != nil {
			return nil, fmt.Errorf("block_rules: item %d: invalid regular expression %q: %v (gw uses Go's RE2 syntax: no look-around or back-references)", i+1, rule, err)
		}
	}
	return rules, nil
}
