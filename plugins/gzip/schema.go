package gzip

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "types": {"anyOf": [{"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}, {"enum": ["*"]}], "default": ["text/html"]},
    "min_length": {"type": "integer", "minimum": 1, "default": 20},
    "comp_level": {"type": "integer", "minimum": 1, "maximum": 9, "default": 1},
    "http_version": {"enum": [1.1, 1.0], "default": 1.1},
    "buffers": {
      "type": "object",
      "properties": {
        "number": {"type": "integer", "minimum": 1, "maximum": 2147483648, "default": 32},
        "size": {"type": "integer", "minimum": 1, "maximum": 2147483648, "default": 4096}
      },
      "additionalProperties": false
    },
    "vary": {"type": "boolean"},
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)
