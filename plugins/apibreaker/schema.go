package apibreaker

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts: APISIX's, with the
// bounds of Parse (max_breaker_sec, failures, successes) and no other member in
// break_response_headers' items, unhealthy and healthy. A header value's variables, and
// APISIX's uniqueItems on the status lists (which schemacheck does not read), are checked
// by Parse alone.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "break_response_code": {"type": "integer", "minimum": 200, "maximum": 599},
    "break_response_body": {"type": "string"},
    "break_response_headers": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "key": {"type": "string", "minLength": 1},
          "value": {"type": "string", "minLength": 1}
        },
        "required": ["key", "value"],
        "additionalProperties": false
      }
    },
    "max_breaker_sec": {"type": "integer", "minimum": 3, "maximum": 8388608, "default": 300},
    "unhealthy": {
      "type": "object",
      "properties": {
        "http_statuses": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 500, "maximum": 599}, "default": [500]},
        "failures": {"type": "integer", "minimum": 1, "maximum": 2621, "default": 3}
      },
      "additionalProperties": false,
      "default": {"http_statuses": [500], "failures": 3}
    },
    "healthy": {
      "type": "object",
      "properties": {
        "http_statuses": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 200, "maximum": 499}, "default": [200]},
        "successes": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 3}
      },
      "additionalProperties": false,
      "default": {"http_statuses": [200], "successes": 3}
    },
    "disable": {"type": "boolean"},
    "_meta": {"type": "object"}
  },
  "required": ["break_response_code"],
  "additionalProperties": false
}`)
