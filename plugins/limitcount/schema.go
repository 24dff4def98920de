package limitcount

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts: the policies and window
// types not supported yet (redis-sentinel, sliding) are left out of their enums. The
// redis settings' own rules (which a policy requires, their ranges: redisconf.go) are
// Parse's, so the schema allows them as anything, as it does the bounds tying a count
// above MaxUsed to a short time_window; the other bounds are Parse's (maxTimeWindow).
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "count": {"type": "integer", "minimum": 1, "maximum": 9223372036854775807},
    "time_window": {"type": "integer", "minimum": 1, "maximum": 10737418},
    "key_type": {"type": "string", "enum": ["var", "var_combination", "constant"], "default": "var"},
    "key": {"type": "string", "default": "remote_addr"},
    "rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 503},
    "rejected_msg": {"type": "string", "minLength": 1},
    "policy": {"type": "string", "enum": ["local", "redis", "redis-cluster"], "default": "local"},
    "allow_degradation": {"type": "boolean", "default": false},
    "show_limit_quota_header": {"type": "boolean", "default": true},
    "group": {"type": "string", "minLength": 1},
    "window_type": {"type": "string", "enum": ["fixed"], "default": "fixed"},
    "disable": {"type": "boolean"},
    "_meta": {"type": "object"},
    "sync_interval": {},
    "sentinel_username": {},
    "sentinel_password": {}
  },
  "patternProperties": {"^redis_": {}},
  "required": ["count", "time_window"],
  "additionalProperties": false
}`)
