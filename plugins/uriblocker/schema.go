package uriblocker

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts but for the rules' syntax
// and their being distinct (APISIX's uniqueItems), which Parse checks. rejected_code stops
// at 599, the last HTTP status, where APISIX's has no maximum.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "block_rules": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 4096}},
    "rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 403},
    "rejected_msg": {"type": "string", "minLength": 1},
    "case_insensitive": {"type": "boolean", "default": false},
    "_meta": {"type": "object"}
  },
  "required": ["block_rules"],
  "additionalProperties": false
}`)
