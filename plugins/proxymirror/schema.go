package proxymirror

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, APISIX's without grpc and grpcs hosts, which
// gw does not mirror yet, and without unknown members.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "host": {"type": "string", "pattern": "^https?://([\\da-zA-Z.-]+|\\[[\\da-fA-F:]+\\])(:\\d+)?$"},
    "path": {"type": "string", "pattern": "^/[^?&]+$"},
    "path_concat_mode": {"type": "string", "enum": ["replace", "prefix"], "default": "replace"},
    "sample_ratio": {"type": "number", "minimum": 0.00001, "maximum": 1, "default": 1},
    "_meta": {"type": "object"}
  },
  "required": ["host"],
  "additionalProperties": false
}`)
