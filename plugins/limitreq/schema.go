package limitreq

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts. The redis settings' own
// rules (which a policy requires, their ranges: redispolicy) are Parse's, so the schema
// allows them as anything; so is the bound on burst/rate.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "rate": {"type": "number", "minimum": 3.1709791983764586e-08, "maximum": 10000000},
    "burst": {"type": "number", "minimum": 0},
    "key_type": {"type": "string", "enum": ["var", "var_combination"], "default": "var"},
    "key": {"type": "string"},
    "rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 503},
    "rejected_msg": {"type": "string", "minLength": 1},
    "nodelay": {"type": "boolean", "default": false},
    "allow_degradation": {"type": "boolean", "default": false},
    "policy": {"type": "string", "enum": ["local", "redis", "redis-cluster"], "default": "local"},
    "disable": {"type": "boolean"},
    "_meta": {"type": "object"}
  },
  "patternProperties": {"^redis_": {}},
  "required": ["rate", "burst", "key"],
  "additionalProperties": false
}`)
