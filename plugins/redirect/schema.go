package redirect

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts but for the templates
// and the regex, which Parse compiles (and where it refuses a variable gw cannot read).
// ret_code stops at 599, where APISIX's has no maximum.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "ret_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 302},
    "uri": {"type": "string", "minLength": 2},
    "regex_uri": {
      "description": "params for generating new uri that substitute from client uri, first param is regular expression, the second one is uri template",
      "type": "array", "minItems": 2, "maxItems": 2,
      "items": {"description": "regex uri", "type": "string"}
    },
    "http_to_https": {"type": "boolean"},
    "encode_uri": {"type": "boolean", "default": false},
    "append_query_string": {"type": "boolean", "default": false},
    "_meta": {"type": "object"}
  },
  "oneOf": [
    {"required": ["uri"]},
    {"required": ["regex_uri"]},
    {"required": ["http_to_https"]}
  ],
  "additionalProperties": false
}`)
