package httplogger

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema: APISIX's, without the members gw refuses as
// not supported yet (include_req_body_expr, include_resp_body_expr,
// request_header_keys), and without unknown members.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "uri": {"type": "string", "pattern": "^https?://"},
    "auth_header": {"type": "string"},
    "timeout": {"type": "integer", "minimum": 1, "maximum": 86400, "default": 3},
    "log_format": {"type": "object", "additionalProperties": {"type": "string"}},
    "include_req_body": {"type": "boolean", "default": false},
    "include_resp_body": {"type": "boolean", "default": false},
    "concat_method": {"type": "string", "enum": ["json", "new_line"], "default": "json"},
    "ssl_verify": {"type": "boolean", "default": false},
    "name": {"type": "string", "minLength": 1, "default": "log buffer"},
    "batch_max_size": {"type": "integer", "minimum": 1, "maximum": 1000000, "default": 1000},
    "inactive_timeout": {"type": "integer", "minimum": 1, "maximum": 86400, "default": 5},
    "buffer_duration": {"type": "integer", "minimum": 1, "maximum": 86400, "default": 60},
    "max_retry_count": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 0},
    "retry_delay": {"type": "integer", "minimum": 0, "maximum": 86400, "default": 1},
    "_meta": {"type": "object"}
  },
  "required": ["uri"],
  "additionalProperties": false
}`)
