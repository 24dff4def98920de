package brotli

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "types": {"anyOf": [{"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}, {"enum": ["*"]}], "default": ["text/html"]},
    "min_length": {"type": "integer", "minimum": 1, "default": 20},
    "mode": {"type": "integer", "enum": [0], "default": 0},
    "comp_level": {"type": "integer", "minimum": 0, "maximum": 11, "default": 6},
    "lgwin": {"type": "integer", "enum": [0, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24], "default": 19},
    "lgblock": {"type": "integer", "enum": [0], "default": 0},
    "http_version": {"enum": [1.1, 1.0], "default": 1.1},
    "vary": {"type": "boolean"},
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)
