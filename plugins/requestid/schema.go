package requestid

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts but for "ksuid", which
// the enum lists as APISIX's does and Parse refuses as not supported yet. header_name must
// be a header field name and range_id's char_set printable, where APISIX takes any
// string; range_id's length stops at 1024.
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "header_name": {"type": "string", "minLength": 1, "pattern": "^[!#$%&'*+.^_` + "`" + `|~0-9A-Za-z-]+$", "default": "X-Request-Id"},
    "include_in_response": {"type": "boolean", "default": true},
    "algorithm": {"type": "string", "enum": ["uuid", "nanoid", "range_id", "ksuid", "uuidv7"], "default": "uuid"},
    "range_id": {
      "type": "object",
      "properties": {
        "length": {"type": "integer", "minimum": 6, "maximum": 1024, "default": 16},
        "char_set": {"type": "string", "minLength": 6, "pattern": "^[!-~]+$",
          "default": "abcdefghijklmnopqrstuvwxyzABCDEFGHIGKLMNOPQRSTUVWXYZ0123456789"}
      },
      "additionalProperties": false
    },
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)
