package proxyrewrite

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts. The schema cannot say
// what Parse alone checks: that regex_uri holds pairs of an RE2 regex and a replacement,
// and that templates name known variables.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "uri": {"type": "string", "minLength": 1, "maxLength": 4096, "pattern": "^/"},
    "regex_uri": {"type": "array", "minItems": 2, "items": {"type": "string"}},
    "host": {"type": "string", "pattern": "^[0-9a-zA-Z.-]+(:[0-9]{1,5})?$"},
    "method": {"type": "string",
      "enum": ["GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "MKCOL", "COPY", "MOVE", "PROPFIND", "LOCK", "UNLOCK", "PATCH", "TRACE"]},
    "headers": {"anyOf": [
      {"type": "object", "minProperties": 1, "additionalProperties": false,
        "properties": {
          "add": {"type": "object", "minProperties": 1, "additionalProperties": false,
            "patternProperties": {"^[!-9;-~]+$": {"anyOf": [
              {"type": "number"}, {"type": "string", "pattern": "^[ -~]*$"},
              {"type": "array", "minItems": 1, "items": {"anyOf": [{"type": "number"}, {"type": "string", "pattern": "^[ -~]*$"}]}}]}}},
          "set": {"type": "object", "minProperties": 1, "additionalProperties": false,
            "patternProperties": {"^[!-9;-~]+$": {"anyOf": [
              {"type": "number"}, {"type": "string", "pattern": "^[ -~]*$"},
              {"type": "array", "minItems": 1, "items": {"anyOf": [{"type": "number"}, {"type": "string", "pattern": "^[ -~]*$"}]}}]}}},
          "remove": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^[!-9;-~]+$"}}
        }},
      {"type": "object", "minProperties": 1, "additionalProperties": false,
        "patternProperties": {"^[!-9;-~]+$": {"anyOf": [{"type": "number"}, {"type": "string", "pattern": "^[ -~]*$"}]}}}
    ]},
    "use_real_request_uri_unsafe": {"type": "boolean", "default": false},
    "_meta": {"type": "object"}
  },
  "minProperties": 1,
  "additionalProperties": false
}`)
