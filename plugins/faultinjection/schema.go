package faultinjection

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts but for the vars
// expressions themselves and the templates, which Parse compiles. http_status stops at
// 599 and duration at 3600 seconds, where APISIX's have no maximum; a configuration sets
// abort or delay, not _meta alone.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "abort": {
      "type": "object",
      "properties": {
        "http_status": {"type": "integer", "minimum": 200, "maximum": 599},
        "body": {"type": "string", "minLength": 0},
        "headers": {
          "type": "object",
          "minProperties": 1,
          "patternProperties": {"^[^:\\r\\n]+$": {"oneOf": [{"type": "string", "pattern": "^[^\\r\\n]*$"}, {"type": "number"}]}},
          "additionalProperties": false
        },
        "percentage": {"type": "integer", "minimum": 0, "maximum": 100},
        "vars": {"type": "array", "maxItems": 20, "items": {"type": "array"}}
      },
      "required": ["http_status"],
      "additionalProperties": false
    },
    "delay": {
      "type": "object",
      "properties": {
        "duration": {"type": "number", "minimum": 0, "maximum": 3600},
        "percentage": {"type": "integer", "minimum": 0, "maximum": 100},
        "vars": {"type": "array", "maxItems": 20, "items": {"type": "array"}}
      },
      "required": ["duration"],
      "additionalProperties": false
    },
    "_meta": {"type": "object"}
  },
  "anyOf": [
    {"required": ["abort"]},
    {"required": ["delay"]}
  ],
  "additionalProperties": false
}`)
