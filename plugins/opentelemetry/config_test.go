package opentelemetry

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want func(c *Config) bool
	}{
		{`{}`, func(c *Config) bool { return c.Sampler.Kind == AlwaysOff }},
		{`{"sampler":{"name":"always_on"}}`, func(c *Config) bool { return c.Sampler.Kind == AlwaysOn }},
		{`{"sampler":{"name":"trace_id_ratio","options":{"fraction":0.5}}}`, func(c *Config) bool {
			return c.Sampler.Kind == TraceIDRatio && c.Sampler.Fraction == 0.5
		}},
		{`{"sampler":{"name":"parent_base","options":{"root":{"name":"trace_id_ratio","options":{"fraction":0.25}}}}}`, func(c *Config) bool {
			return c.Sampler.Kind == ParentBase && c.Sampler.Root != nil && c.Sampler.Root.Kind == TraceIDRatio && c.Sampler.Root.Fraction == 0.25
		}},
		{`{"sampler":{"name":"parent_base","options":{"fraction":0,"root":{"name":"always_on"}}}}`, func(c *Config) bool {
			return c.Sampler.Root.Kind == AlwaysOn
		}},
		{`{"sampler":{"name":"always_on"},"additional_attributes":["route_id","http_x_user","$remote_addr"]}`, func(c *Config) bool {
			return len(c.Attributes) == 3 && c.Attributes[2].Key == "$remote_addr"
		}},
		{`{"additional_header_prefix_attributes":["X-Trace-*","User-Agent","*"]}`, func(c *Config) bool {
			h := c.HeaderAttributes
			return len(h) == 3 && h[0].Prefix && h[0].Name == "x-trace-" && !h[1].Prefix && h[1].Key == "User-Agent" && !h[2].Prefix
		}},
		{`{"sampler":{"name":"always_on"},"_meta":{"disable":false}}`, func(c *Config) bool { return c.Sampler.Kind == AlwaysOn }},
	} {
		c, err := Parse(json.RawMessage(tt.raw))
		if err != nil {
			t.Errorf("Parse(%s): %v", tt.raw, err)
			continue
		}
		if !tt.want(c) {
			t.Errorf("Parse(%s) = %+v", tt.raw, c)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`[]`, `must be`},
		{`{"sampler":"always_on"}`, `sampler: `},
		{`{"sampler":{"name":"sometimes"}}`, `sampler.name: must be one of "always_off", "always_on", "trace_id_ratio", "parent_base", got "sometimes"`},
		{`{"sampler":{"name":"always_on","rate":1}}`, `sampler.rate: unknown field`},
		{`{"sampler":{"name":"trace_id_ratio","options":{"fraction":1.5}}}`, `sampler.options.fraction: must be a number from 0 to 1, got 1.5`},
		{`{"sampler":{"name":"trace_id_ratio","options":{"fraction":-0.1}}}`, `sampler.options.fraction: must be a number from 0 to 1, got -0.1`},
		{`{"sampler":{"name":"trace_id_ratio","options":{"fraction":"0.5"}}}`, `sampler.options.fraction: must be a number from 0 to 1, got "0.5"`},
		{`{"sampler":{"name":"trace_id_ratio","options":[]}}`, `sampler.options: `},
		{`{"sampler":{"name":"parent_base","options":{"root":{"name":"parent_base"}}}}`, `sampler.options.root.name: must be one of "always_off", "always_on", "trace_id_ratio", got "parent_base"`},
		{`{"sampler":{"name":"parent_base","options":{"root":{"name":"always_on","options":{"root":{}}}}}}`, `sampler.options.root.options.root: unknown field; options has fraction`},
		{`{"sampler":{"name":"parent_base","options":{"seed":1}}}`, `sampler.options.seed: unknown field`},
		{`{"additional_attributes":"route_id"}`, `additional_attributes: must be an array of strings`},
		{`{"additional_attributes":[""]}`, `additional_attributes: item 1 must not be empty`},
		{`{"additional_attributes":["no_such_variable"]}`, `additional_attributes: item 1: `},
		{`{"additional_header_prefix_attributes":["a b*"]}`, `additional_header_prefix_attributes: item 1 must be a header name`},
		{`{"additional_header_prefix_attributes":[1]}`, `additional_header_prefix_attributes: item 1 must be a string`},
		{`{"sample":{}}`, `sample: unknown field`},
	} {
		_, err := Parse(json.RawMessage(tt.raw))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", tt.raw, err, tt.want)
		}
	}
}
