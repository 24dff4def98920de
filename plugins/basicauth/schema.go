package basicauth

import "gw/plugins"

var (
	_ plugins.Described         = plugin{}
	_ plugins.ConsumerDescribed = plugin{}
)

// Schema is a route's configuration's JSON Schema, what Parse accepts, titled as APISIX
// titles it.
func (plugin) Schema() []byte { return schema }

// ConsumerSchema is a consumer's configuration's JSON Schema, what ParseConsumer accepts
// but for secret references gw cannot resolve ($secret://), which it refuses too.
func (plugin) ConsumerSchema() []byte { return consumerSchema }

var schema = []byte(`{
  "type": "object",
  "title": "work with route or service object",
  "properties": {
    "hide_credentials": {"type": "boolean", "default": false},
    "realm": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[ !#-\\[\\]-~]+$", "default": "basic"},
    "anonymous_consumer": {"type": "string", "minLength": 1},
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)

var consumerSchema = []byte(`{
  "type": "object",
  "title": "work with consumer object",
  "properties": {
    "username": {"type": "string", "minLength": 1, "pattern": "^[^\\t\\n\\v\\f\\r :]+$", "not": {"pattern": "(?i)^\\$(env|secret)://"}},
    "password": {"type": "string", "minLength": 1, "pattern": "^[^\\t\\n\\v\\f\\r ]+$"}
  },
  "required": ["username", "password"],
  "additionalProperties": false
}`)
