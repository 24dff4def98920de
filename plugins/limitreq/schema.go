package limitreq

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts: the redis policies, not
// supported yet, are left out of policy's enum, and the redis settings, which Parse lets
// through so that their policy is what it refuses, are allowed as anything. The bound on
// burst/rate is Parse's alone.
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
    "policy": {"type": "string", "enum": ["local"], "default": "local"},
    "disable": {"type": "boolean"},
    "_meta": {"type": "object"}
  },
  "patternProperties": {"^redis_": {}},
  "required": ["rate", "burst", "key"],
  "additionalProperties": false
}`)
