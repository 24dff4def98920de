package iprestriction

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts but for the addresses
// themselves, which Parse reads with net/netip (as APISIX checks them in code, not in its
// schema).
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "message": {"type": "string", "minLength": 1, "maxLength": 1024, "default": "Your IP address is not allowed"},
    "response_code": {"type": "integer", "minimum": 403, "maximum": 404, "default": 403},
    "whitelist": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "blacklist": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "_meta": {"type": "object"}
  },
  "oneOf": [
    {"required": ["whitelist"]},
    {"required": ["blacklist"]}
  ],
  "additionalProperties": false
}`)
