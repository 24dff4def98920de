package keyauth

import "gw/plugins"

var (
	_ plugins.Described         = plugin{}
	_ plugins.ConsumerDescribed = plugin{}
)

// Schema is a route's configuration's JSON Schema, what Parse accepts. APISIX's key-auth
// schemas have no title, unlike basic-auth's.
func (plugin) Schema() []byte { return schema }

// ConsumerSchema is a consumer's configuration's JSON Schema, what ParseConsumer accepts
// but for secret references gw cannot resolve ($secret://), which it refuses too.
func (plugin) ConsumerSchema() []byte { return consumerSchema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "header": {"type": "string", "minLength": 1, "default": "apikey"},
    "query": {"type": "string", "minLength": 1, "default": "apikey"},
    "hide_credentials": {"type": "boolean", "default": false},
    "realm": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[ !#-\\[\\]-~]+$", "default": "key"},
    "anonymous_consumer": {"type": "string", "minLength": 1},
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)

var consumerSchema = []byte(`{
  "type": "object",
  "properties": {
    "key": {"type": "string", "minLength": 1}
  },
  "required": ["key"],
  "additionalProperties": false
}`)
