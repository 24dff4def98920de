package trafficsplit

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"gw/conf"
)

// TestParse holds every accept and reject of Parse; rows marked with a TEST are the
// configurations of t/plugin/traffic-split.t.
func TestParse(t *testing.T) {
	cases := []struct {
		name, cfg string
		wantErr   string // "" accepts
	}{
		// t/plugin/traffic-split.t TEST 1: schema validation passed.
		{"TEST 1", `{"rules":[{"match":[{"vars":[["arg_name","==","jack"],["arg_age","!","<","16"]]}],
			"weighted_upstreams":[{"upstream":{"name":"upstream_A","type":"roundrobin","nodes":{"127.0.0.1:1981":10},"timeout":{"connect":15,"send":15,"read":15}},"weight":1},{"weight":1}]}]}`, ""},
		// TEST 2: match is missing.
		{"TEST 2", `{"rules":[{"weighted_upstreams":[{"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1981":10}},"weight":1},{"weight":1}]}]}`, ""},
		// TEST 3: the vars operator's type is wrong.
		{"TEST 3", `{"rules":[{"match":[{"vars":[["arg_name",1,"jack"]]}],"weighted_upstreams":[{"weight":1}]}]}`,
			"rules[0].match[0].vars: failed to validate the 'vars' expression:"},
		// TEST 4: no rules: the route's own upstream.
		{"TEST 4", `{}`, ""},
		// TEST 6: weighted_upstreams missing: the route's own.
		{"TEST 6", `{"rules":[{"match":[{"vars":[["arg_name","==","jack"]]}]}]}`, ""},
		// gw's own.
		{"upstream_id", `{"rules":[{"weighted_upstreams":[{"upstream_id":"u1","weight":3},{"upstream_id":2}]}]}`, ""},
		{"empty rules", `{"rules":[]}`, ""},
		{"empty match", `{"rules":[{"match":[],"weighted_upstreams":[{"weight":1}]}]}`, ""},
		{"match item without vars", `{"rules":[{"match":[{}]}]}`, ""},
		{"weight 0", `{"rules":[{"weighted_upstreams":[{"upstream_id":"u1","weight":0},{"weight":1}]}]}`, ""},
		{"_meta", `{"_meta":{}}`, ""},
		{"rules not an array", `{"rules":{}}`, "rules: must be an array, got {}"},
		{"rule not an object", `{"rules":[1]}`, "rules[0]:"},
		{"unknown rule field", `{"rules":[{"when":[]}]}`, "rules[0].when: unknown field; known fields: match, weighted_upstreams"},
		{"match not an array", `{"rules":[{"match":{}}]}`, "rules[0].match: must be an array, got {}"},
		{"vars not an array", `{"rules":[{"match":[{"vars":"x"}]}]}`, `rules[0].match[0].vars: must be an array, got "x"`},
		{"unknown match field", `{"rules":[{"match":[{"var":[]}]}]}`, "rules[0].match[0].var: unknown field; known fields: vars"},
		{"unknown variable", `{"rules":[{"match":[{"vars":[["nope_x","==","1"]]}]}]}`, "rules[0].match[0].vars: failed to validate the 'vars' expression:"},
		{"no weighted upstreams", `{"rules":[{"weighted_upstreams":[]}]}`, "rules[0].weighted_upstreams: must hold 1 to 20 upstreams, got 0"},
		{"21 weighted upstreams", `{"rules":[{"weighted_upstreams":[` + strings.Repeat(`{"weight":1},`, 20) + `{"weight":1}]}]}`,
			"rules[0].weighted_upstreams: must hold 1 to 20 upstreams, got 21"},
		{"negative weight", `{"rules":[{"weighted_upstreams":[{"weight":-1}]}]}`, "rules[0].weighted_upstreams[0].weight: must be an integer from 0 to 2147483648, got -1"},
		{"weight a string", `{"rules":[{"weighted_upstreams":[{"weight":"1"}]}]}`, `rules[0].weighted_upstreams[0].weight: must be an integer from 0 to 2147483648, got "1"`},
		{"bad upstream_id", `{"rules":[{"weighted_upstreams":[{"upstream_id":"a b"}]}]}`, `rules[0].weighted_upstreams[0].upstream_id: must be an id`},
		{"both", `{"rules":[{"weighted_upstreams":[{"upstream_id":"u1","upstream":{"nodes":{"127.0.0.1:1":1}}}]}]}`,
			"rules[0].weighted_upstreams[0]: set upstream_id or upstream, not both"},
		{"bad inline upstream", `{"rules":[{"weighted_upstreams":[{"upstream":{"type":"nope","nodes":{"127.0.0.1:1":1}}}]}]}`,
			"rules[0].weighted_upstreams[0].upstream:"},
		{"inline upstream without nodes", `{"rules":[{"weighted_upstreams":[{"upstream":{"type":"roundrobin"}}]}]}`,
			"rules[0].weighted_upstreams[0].upstream:"},
		{"inline checks", `{"rules":[{"weighted_upstreams":[{"upstream":{"nodes":{"127.0.0.1:1":1},"checks":{"active":{"http_path":"/"}}}}]}]}`,
			"rules[0].weighted_upstreams[0].upstream.checks: is not supported"},
		{"unknown weighted field", `{"rules":[{"weighted_upstreams":[{"wieght":1}]}]}`,
			"rules[0].weighted_upstreams[0].wieght: unknown field; known fields: upstream_id, upstream, weight"},
		{"unknown field", `{"rule":[]}`, "rule: unknown field; known fields: rules"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(json.RawMessage(tc.cfg))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one starting %q", err, tc.wantErr)
			}
		})
	}
}

// Each weighted upstream is one entry of the set the host compiles, in order, and a rule
// without weighted_upstreams gets APISIX's default, the route's own; UpstreamIDs lists the
// stored ones for the worker's index and the Admin API's delete check.
func TestParseUpstreams(t *testing.T) {
	raw := json.RawMessage(`{"rules":[{"weighted_upstreams":[{"upstream_id":"u1","weight":2},{"upstream":{"nodes":{"127.0.0.1:1":1}}}]},
		{"match":[{"vars":[["arg_a","==","1"]]}]},{"weighted_upstreams":[{"upstream_id":7}]}]}`)
	c, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 4 || c.Upstreams[0].ID != "u1" || c.Upstreams[1].Upstream == nil ||
		c.Upstreams[2] != (c.Upstreams[2]) || c.Upstreams[2].ID != "" || c.Upstreams[2].Upstream != nil || c.Upstreams[3].ID != "7" {
		t.Fatalf("upstreams: %+v", c.Upstreams)
	}
	if w := c.Rules[0].Weighted; len(w) != 2 || w[0] != (Weighted{0, 2}) || w[1] != (Weighted{1, 1}) {
		t.Fatalf("rule 0: %+v", w)
	}
	if w := c.Rules[1].Weighted; len(w) != 1 || w[0] != (Weighted{2, 1}) {
		t.Fatalf("rule 1 (default): %+v", w)
	}
	if ids := (plugin{}).UpstreamIDs(raw); !slices.Equal(ids, []conf.ID{"u1", "7"}) {
		t.Fatalf("UpstreamIDs: %v", ids)
	}
}
