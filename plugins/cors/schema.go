package cors

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, what Parse accepts but for three rules
// Parse adds: no "*" with allow_credential, regexes RE2 compiles, and distinct (APISIX's
// uniqueItems, which schemacheck does not read).
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "allow_origins": {"type": "string", "pattern": "^(\\*|\\*\\*|null|\\w+://[^,]+(,\\w+://[^,]+)*)$", "default": "*"},
    "allow_methods": {"type": "string", "default": "*"},
    "allow_headers": {"type": "string", "default": "*"},
    "expose_headers": {"type": "string"},
    "max_age": {"type": "integer", "default": 5},
    "allow_credential": {"type": "boolean", "default": false},
    "allow_origins_by_regex": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 4096}, "minItems": 1},
    "allow_origins_by_metadata": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 4096}, "minItems": 1},
    "timing_allow_origins": {"type": "string", "pattern": "^(\\*|\\*\\*|null|\\w+://[^,]+(,\\w+://[^,]+)*)$"},
    "timing_allow_origins_by_regex": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 4096}, "minItems": 1},
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)

// metadataSchema is the plugin_metadata's JSON Schema, what ParseMetadata accepts.
var metadataSchema = []byte(`{
  "type": "object",
  "properties": {
    "allow_origins": {"type": "object", "additionalProperties": {"type": "string", "pattern": "^(\\*|\\*\\*|null|\\w+://[^,]+(,\\w+://[^,]+)*)$"}}
  },
  "additionalProperties": false
}`)
