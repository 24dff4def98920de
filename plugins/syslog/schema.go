package syslog

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is APISIX's, without what gw refuses as not supported yet (flush_limit,
// drop_limit, pool_size).
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "host": {"type": "string", "minLength": 1},
    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
    "sock_type": {"type": "string", "enum": ["tcp", "udp"], "default": "tcp"},
    "tls": {"type": "boolean", "default": false},
    "timeout": {"type": "integer", "minimum": 1, "maximum": 86400000, "default": 3000},
    "log_format": {"type": "object", "additionalProperties": {"type": "string"}},
    "include_req_body": {"type": "boolean", "default": false},
    "name": {"type": "string", "minLength": 1, "default": "sys logger"},
    "batch_max_size": {"type": "integer", "minimum": 1, "maximum": 1000000, "default": 1000},
    "inactive_timeout": {"type": "integer", "minimum": 1, "maximum": 86400, "default": 5},
    "buffer_duration": {"type": "integer", "minimum": 1, "maximum": 86400, "default": 60},
    "max_retry_count": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 0},
    "retry_delay": {"type": "integer", "minimum": 0, "maximum": 86400, "default": 1},
    "_meta": {"type": "object"}
  },
  "required": ["host", "port"],
  "additionalProperties": false
}`)
