package responserewrite

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts but for what a schema
// cannot say: body with filters, base64 that does not decode, header values naming a
// variable gw does not know, the new form's members beside others, regexes and
// replacements RE2 cannot run, and what a vars expression must be (conf.ParseResponseVars).
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "status_code": {"type": "integer", "minimum": 200, "maximum": 598},
    "body": {"type": "string"},
    "body_base64": {"type": "boolean", "default": false},
    "vars": {"type": "array"},
    "headers": {
      "type": "object",
      "minProperties": 1,
      "anyOf": [
        {"patternProperties": {"^[^:]+$": {"oneOf": [{"type": "string"}, {"type": "number"}]}}, "additionalProperties": false},
        {
          "properties": {
            "add": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^[^:]+:[^:]*[^/]$"}},
            "set": {"type": "object", "minProperties": 1, "patternProperties": {"^[^:]+$": {"oneOf": [{"type": "string"}, {"type": "number"}]}}, "additionalProperties": false},
            "remove": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^[^:]+$"}}
          },
          "additionalProperties": false
        }
      ]
    },
    "filters": {
      "type": "array",
      "minItems": 1,
      "items": {
        "type": "object",
        "properties": {
          "regex": {"type": "string", "minLength": 1},
          "scope": {"type": "string", "enum": ["once", "global"], "default": "once"},
          "replace": {"type": "string"},
          "options": {"type": "string", "default": "jo"}
        },
        "required": ["regex", "replace"],
        "additionalProperties": false
      }
    },
    "max_resp_body_size": {"type": "integer", "minimum": 1, "default": 67108864},
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)
