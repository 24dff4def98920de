package filelogger

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is APISIX's, without what gw refuses as not supported yet.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1},
    "log_format": {"type": "object", "additionalProperties": {"type": "string"}},
    "include_req_body": {"type": "boolean", "default": false},
    "_meta": {"type": "object"}
  },
  "required": ["path"],
  "additionalProperties": false
}`)
