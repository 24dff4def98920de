package forwardauth

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, APISIX's, with what Parse checks beside it
// written in: uri an http or https URL, header names tokens. The schema cannot say that
// extra_headers' values name variables gw knows.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "uri": {"type": "string", "minLength": 1, "pattern": "^[hH][tT][tT][pP][sS]?://[^/?#@]+"},
    "allow_degradation": {"type": "boolean", "default": false},
    "status_on_error": {"type": "integer", "minimum": 200, "maximum": 599, "default": 403},
    "ssl_verify": {"type": "boolean", "default": true},
    "request_method": {"type": "string", "enum": ["GET", "POST"], "default": "GET"},
    "max_req_body_size": {"type": "integer", "minimum": 1, "maximum": 9007199254740992, "default": 67108864},
    "request_headers": {"type": "array", "items": {"type": "string", "pattern": "^[!#-'*+.0-9A-Z^-z|~-]+$"}, "default": []},
    "extra_headers": {"type": "object", "minProperties": 1,
      "patternProperties": {"^[!#-'*+.0-9A-Z^-z|~-]+$": {"type": "string"}},
      "additionalProperties": false},
    "upstream_headers": {"type": "array", "items": {"type": "string", "pattern": "^[!#-'*+.0-9A-Z^-z|~-]+$"}, "default": []},
    "client_headers": {"type": "array", "items": {"type": "string", "pattern": "^[!#-'*+.0-9A-Z^-z|~-]+$"}, "default": []},
    "timeout": {"type": "integer", "minimum": 1, "maximum": 60000, "default": 3000},
    "keepalive": {"type": "boolean", "default": true},
    "keepalive_timeout": {"type": "integer", "minimum": 1000, "maximum": 1099511627776, "default": 60000},
    "keepalive_pool": {"type": "integer", "minimum": 1, "maximum": 2147483648, "default": 5},
    "_meta": {"type": "object"}
  },
  "required": ["uri"],
  "additionalProperties": false
}`)
