package opentelemetry

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema: APISIX's, with fraction bounded to [0, 1]
// and additionalProperties false, as Parse is strict. Parse also refuses a variable gw
// does not know in additional_attributes.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "sampler": {
      "type": "object",
      "properties": {
        "name": {"type": "string", "enum": ["always_on", "always_off", "trace_id_ratio", "parent_base"], "default": "always_off"},
        "options": {
          "type": "object",
          "properties": {
            "fraction": {"type": "number", "minimum": 0, "maximum": 1, "default": 0},
            "root": {
              "type": "object",
              "properties": {
                "name": {"type": "string", "enum": ["always_on", "always_off", "trace_id_ratio"], "default": "always_off"},
                "options": {
                  "type": "object",
                  "properties": {"fraction": {"type": "number", "minimum": 0, "maximum": 1, "default": 0}},
                  "additionalProperties": false
                }
              },
              "additionalProperties": false
            }
          },
          "additionalProperties": false
        }
      },
      "additionalProperties": false
    },
    "additional_attributes": {"type": "array", "items": {"type": "string", "minLength": 1}},
    "additional_header_prefix_attributes": {"type": "array", "items": {"type": "string", "minLength": 1}},
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)
