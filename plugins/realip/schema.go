package realip

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts but for the variable
// named by source and the addresses, which Parse reads (conf.ParseVar, net/netip).
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "source": {"type": "string", "minLength": 1},
    "trusted_addresses": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "recursive": {"type": "boolean", "default": false},
    "_meta": {"type": "object"}
  },
  "required": ["source"],
  "additionalProperties": false
}`)
