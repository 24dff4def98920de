package consumerrestriction

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts but for
// "consumer_group_id", which the enum lists as APISIX's does and Parse refuses as not
// supported yet. An allowed_by_methods item requires user and methods, where APISIX's
// requires neither (config.go says why).
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "type": {"type": "string", "enum": ["consumer_name", "service_id", "route_id", "consumer_group_id"], "default": "consumer_name"},
    "blacklist": {"type": "array", "minItems": 1, "items": {"type": "string"}},
    "whitelist": {"type": "array", "minItems": 1, "items": {"type": "string"}},
    "allowed_by_methods": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "user": {"type": "string"},
          "methods": {"type": "array", "minItems": 1, "items": {"type": "string", "description": "HTTP method",
            "enum": ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PURGE"]}}
        },
        "required": ["user", "methods"],
        "additionalProperties": false
      }
    },
    "rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 403},
    "rejected_msg": {"type": "string"},
    "_meta": {"type": "object"}
  },
  "anyOf": [
    {"required": ["blacklist"]},
    {"required": ["whitelist"]},
    {"required": ["allowed_by_methods"]}
  ],
  "additionalProperties": false
}`)
