package limitconn

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts: conn and burst as
// numbers only (APISIX also takes a variable's name, not supported yet), no rules. The
// redis settings' own rules (redispolicy) are Parse's, so the schema allows them as
// anything; so is the bound on conn + burst.
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
    "policy": {"type": "string", "enum": ["local", "redis", "redis-cluster"], "default": "local"},
    "key_ttl": {"type": "integer", "minimum": 1, "maximum": 2147483647, "default": 3600},
    "disable": {"type": "boolean"},
    "_meta": {"type": "object"}
  },
  "patternProperties": {"^redis_": {}},
  "required": ["conn", "burst", "default_conn_delay", "key"],
  "additionalProperties": false
}`)
