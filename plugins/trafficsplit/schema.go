package trafficsplit

import "gw/plugins"

var _ plugins.Described = plugin{}

// Schema is the configuration's JSON Schema, APISIX's with gw's strictness: no member
// the plugin does not know, and upstream_id or upstream, not both. The schema cannot say
// what Parse alone checks: that vars are expressions gw can evaluate, and that an inline
// upstream is one the Admin API accepts (without checks or tls.client_cert_id).
func (plugin) Schema() []byte { return schema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "rules": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "match": {
            "type": "array",
            "items": {"type": "object", "properties": {"vars": {"type": "array"}}, "additionalProperties": false}
          },
          "weighted_upstreams": {
            "type": "array", "minItems": 1, "maxItems": 20,
            "default": [{"weight": 1}],
            "items": {
              "type": "object",
              "properties": {
                "upstream_id": {"anyOf": [
                  {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-zA-Z0-9-_.]+$"},
                  {"type": "integer", "minimum": 1}]},
                "upstream": {"type": "object"},
                "weight": {"type": "integer", "minimum": 0, "maximum": 2147483648, "default": 1}
              },
              "not": {"required": ["upstream_id", "upstream"]},
              "additionalProperties": false
            }
          }
        },
        "additionalProperties": false
      }
    },
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)
