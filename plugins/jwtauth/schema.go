package jwtauth

import "gw/plugins"

var (
	_ plugins.Described         = plugin{}
	_ plugins.ConsumerDescribed = plugin{}
)

// Schema is a route's configuration's JSON Schema, what Parse accepts (distinct
// claims_to_verify too, which schemacheck cannot say).
func (plugin) Schema() []byte { return schema }

// ConsumerSchema is a consumer's configuration's JSON Schema. Parse refuses more than it
// says: a missing secret or public_key for the algorithm, a secret that is not base64
// with base64_secret, a public key that does not parse, an unresolvable secret reference.
func (plugin) ConsumerSchema() []byte { return consumerSchema }

var schema = []byte(`{
  "type": "object",
  "properties": {
    "header": {"type": "string", "minLength": 1, "default": "authorization"},
    "query": {"type": "string", "minLength": 1, "default": "jwt"},
    "cookie": {"type": "string", "minLength": 1, "default": "jwt"},
    "hide_credentials": {"type": "boolean", "default": false},
    "key_claim_name": {"type": "string", "minLength": 1, "default": "key"},
    "store_in_ctx": {"type": "boolean", "enum": [false], "default": false},
    "realm": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[ !#-\\[\\]-~]+$", "default": "jwt"},
    "anonymous_consumer": {"type": "string", "minLength": 1},
    "claims_to_verify": {"type": "array", "items": {"type": "string", "enum": ["exp", "nbf"]}},
    "_meta": {"type": "object"}
  },
  "additionalProperties": false
}`)

var consumerSchema = []byte(`{
  "type": "object",
  "properties": {
    "key": {"type": "string", "minLength": 1},
    "secret": {"type": "string", "minLength": 1},
    "public_key": {"type": "string", "minLength": 1},
    "algorithm": {"type": "string", "enum": ["HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "EdDSA"], "default": "HS256"},
    "exp": {"type": "integer", "enum": [86400], "default": 86400},
    "base64_secret": {"type": "boolean", "default": false},
    "lifetime_grace_period": {"type": "integer", "minimum": 0, "default": 0}
  },
  "required": ["key"],
  "additionalProperties": false
}`)
