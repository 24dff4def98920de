package limitconn

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts: conn and burst as
// numbers only (APISIX also takes a variable's name, not supported yet), no rules, the
// redis policies left out of policy's enum, and the redis settings, which Parse lets
// through so that their policy is what it refuses, allowed as anything. The bound on
// conn + burst is Parse's alone.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "conn": {"type": "integer", "minimum": 1, "maximum": 65535},
    "burst": {"type": "integer", "minimum": 0, "maximum": 65535},
    "default_conn_delay": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
    "only_use_default_delay": {"type": "boolean", "default": false},
    "key_type": {"type": "string", "enum": ["var", "var_combination"], "default": "var"},
    "key": {"type": "string"},
    "rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 503},
    "rejected_msg": {"type": "string", "minLength": 1},
    "allow_degradation": {"type": "boolean", "default": false},
    "policy": {"type": "string", "enum": ["local"], "default": "local"},
    "disable": {"type": "boolean"},
    "_meta": {"type": "object"}
  },
  "patternProperties": {"^redis_": {}},
  "required": ["conn", "burst", "default_conn_delay", "key"],
  "additionalProperties": false
}`)
