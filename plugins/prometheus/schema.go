package prometheus

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "prefer_name": {"type": "boolean", "default": false},
    "disable": {"type": "boolean"},
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)
