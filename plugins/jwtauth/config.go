package jwtauth

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/authn"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's or a consumer's "plugins" object.
const Name = "jwt-auth"

// Priority places jwt-auth in the chain as APISIX does, between basic-auth and key-auth.
const Priority = 2510

func init() { plugins.Register(plugin{}) }

// plugin is jwt-auth as the host sees it: an authentication plugin whose instances share
// one index of the snapshot's keys (handler.go).
type plugin struct{}

var (
	_ plugins.Plugin       = plugin{}
	_ plugins.ConsumerAuth = plugin{}
)

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// ValidateConsumer checks a consumer's jwt-auth configuration, for the Admin API.
func (plugin) ValidateConsumer(raw json.RawMessage) error {
	_, err := ParseConsumer(raw)
	return err
}

// CredentialField is the key: no two consumers may have one, since the token's key
// claim names the consumer.
func (plugin) CredentialField() string { return "key" }

// SecretFields: the secret and the public key may be "$env://NAME", which the master
// resolves (APISIX encrypts the secret; a public key in the environment is as handy).
func (plugin) SecretFields() []string { return []string{"secret", "public_key"} }

// Config is jwt-auth's configuration on a route or service, with APISIX's defaults.
type Config struct {
	// Header, Query and Cookie name where the token is looked for, in that order. A
	// header value may start "Bearer " or "bearer ".
	Header, Query, Cookie string
	// HideCredentials removes the token (header, argument or cookie) before proxying.
	HideCredentials bool
	// KeyClaimName is the claim holding the consumer's key.
	KeyClaimName string
	Realm        string
	// AnonymousConsumer, when set, is the consumer a request without a valid token runs as.
	AnonymousConsumer string
	// ClaimsToVerify lists the claims that must be present and hold; nil checks exp and
	// nbf only when the token has them.
	ClaimsToVerify []string
}

// ConsumerConfig is jwt-auth's configuration on a consumer, with APISIX's defaults.
type ConsumerConfig struct {
	Key string
	// Secret signs HS tokens; read as base64 when Base64Secret.
	Secret       string
	Base64Secret bool
	// PublicKey (PEM) checks the other algorithms' signatures.
	PublicKey string
	Algorithm string
	// LifetimeGracePeriod is the leeway, in seconds, on exp and nbf.
	LifetimeGracePeriod int64
}

// Parse decodes a route's jwt-auth configuration strictly and applies the defaults.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{Header: "authorization", Query: "jwt", Cookie: "jwt", KeyClaimName: "key", Realm: "jwt"}
	for _, m := range members {
		switch m.Name {
		case "header":
			c.Header, err = m.NonEmptyString()
		case "query":
			c.Query, err = m.NonEmptyString()
		case "cookie":
			c.Cookie, err = m.NonEmptyString()
		case "hide_credentials":
			c.HideCredentials, err = m.Bool()
		case "key_claim_name":
			c.KeyClaimName, err = m.NonEmptyString()
		case "store_in_ctx":
			// APISIX keeps the payload in ctx.jwt_auth_payload for Lua code that runs
			// later (serverless functions, custom plugins). gw runs no Lua and no plugin
			// or variable of its reads a payload: true would be accepted and do nothing.
			var store bool
			if store, err = m.Bool(); err == nil && store {
				err = fmt.Errorf("%s: true is not supported yet: no gw plugin or variable reads the token's payload (APISIX keeps it for Lua code); leave it out or give false", m.Name)
			}
		case "realm":
			c.Realm, err = authn.Realm(m)
		case "anonymous_consumer":
			c.AnonymousConsumer, err = m.NonEmptyString()
		case "claims_to_verify":
			c.ClaimsToVerify, err = claims(m)
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: header, query, cookie, hide_credentials, key_claim_name, store_in_ctx, realm, anonymous_consumer, claims_to_verify", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

func claims(m pluginconf.Member) ([]string, error) {
	var list []string
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &list) != nil {
		return nil, fmt.Errorf("%s: must be an array of \"exp\" and \"nbf\", got %s", m.Name, m.Show())
	}
	seen := map[string]bool{}
	for i, claim := range list {
		if claim != "exp" && claim != "nbf" {
			return nil, fmt.Errorf("%s[%d]: must be \"exp\" or \"nbf\", got %q", m.Name, i, claim)
		}
		if seen[claim] {
			return nil, fmt.Errorf("%s[%d]: %q appears twice; keep one", m.Name, i, claim)
		}
		seen[claim] = true
	}
	return list, nil
}

// The algorithms APISIX's consumer schema lists.
var (
	hmacAlgorithms   = []string{"HS256", "HS384", "HS512"}
	publicAlgorithms = []string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "EdDSA"}
)

// defaultExp is APISIX's default for a consumer's exp, one day in seconds.
const defaultExp = 86400

// ParseConsumer decodes a consumer's jwt-auth configuration strictly and applies the
// defaults. A public key is parsed here, unless it is a secret reference: one that no
// request could be checked against is refused at the write.
func ParseConsumer(raw json.RawMessage) (*ConsumerConfig, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &ConsumerConfig{Algorithm: "HS256"}
	var hasKey, hasSecret, hasPublicKey bool
	for _, m := range members {
		switch m.Name {
		case "key":
			c.Key, err = m.NonEmptyString()
			hasKey = true
		case "secret":
			if c.Secret, err = m.NonEmptyString(); err == nil {
				err = authn.CheckSecretRef(m.Name, c.Secret)
			}
			hasSecret = true
		case "public_key":
			if c.PublicKey, err = m.NonEmptyString(); err == nil {
				err = authn.CheckSecretRef(m.Name, c.PublicKey)
			}
			hasPublicKey = true
		case "algorithm":
			c.Algorithm, err = m.OneOf(append(append([]string(nil), hmacAlgorithms...), publicAlgorithms...)...)
		case "base64_secret":
			c.Base64Secret, err = m.Bool()
		case "exp":
			// The lifetime of the tokens APISIX's sign endpoint issues for the consumer;
			// gw has no sign endpoint, so only APISIX's default, which changes nothing,
			// is accepted.
			var exp int64
			if exp, err = m.PositiveInt(1 << 62); err == nil && exp != defaultExp {
				err = fmt.Errorf("%s: %d is not supported yet: it is the lifetime of the tokens APISIX's sign endpoint issues, and gw signs no tokens; leave it out (or give %d)", m.Name, exp, defaultExp)
			}
		case "lifetime_grace_period":
			c.LifetimeGracePeriod, err = m.IntIn(0, 1<<40)
		case "private_key":
			err = fmt.Errorf("%s: gw signs no tokens (APISIX 3 dropped its sign API): keep the private key with whoever issues them, and remove it here", m.Name)
		default:
			err = fmt.Errorf("%s: unknown field; known fields: key, secret, public_key, algorithm, base64_secret, exp, lifetime_grace_period", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasKey {
		return nil, errors.New("key: is required (the value of the token's key claim that names this consumer)")
	}
	if isHMAC(c.Algorithm) {
		if !hasSecret {
			// APISIX's words.
			return nil, errors.New(`property "secret" is required when using HS based algorithms`)
		}
		if c.Base64Secret && !conf.IsSecretRef(c.Secret) {
			if _, err := decodeBase64(c.Secret); err != nil {
				return nil, errors.New("base64_secret required but the secret is not in base64 format")
			}
		}
		return c, nil
	}
	if !hasPublicKey {
		return nil, fmt.Errorf("public_key: is required with algorithm %q (a PEM public key)", c.Algorithm)
	}
	if !conf.IsSecretRef(c.PublicKey) {
		if _, err := publicKey(c.Algorithm, c.PublicKey); err != nil {
			return nil, fmt.Errorf("public_key: %w", err)
		}
	}
	return c, nil
}

func isHMAC(algorithm string) bool { return strings.HasPrefix(algorithm, "HS") }

// decodeBase64 reads a secret as ngx.decode_base64 does: standard alphabet, padded or not.
func decodeBase64(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// publicKey parses a PEM public key of the kind algorithm needs.
func publicKey(algorithm, pem string) (crypto.PublicKey, error) {
	var key crypto.PublicKey
	var err error
	switch algorithm[:2] {
	case "RS", "PS":
		key, err = jwt.ParseRSAPublicKeyFromPEM([]byte(pem))
	case "ES":
		key, err = jwt.ParseECPublicKeyFromPEM([]byte(pem))
	default: // EdDSA
		key, err = jwt.ParseEdPublicKeyFromPEM([]byte(pem))
	}
	if err != nil {
		return nil, fmt.Errorf("not a PEM public key for %s: %v", algorithm, err)
	}
	return key, nil
}

// verifyKey is what checks a consumer's signatures: the secret's bytes for HMAC, the
// parsed public key otherwise.
func (c *ConsumerConfig) verifyKey() (any, error) {
	if isHMAC(c.Algorithm) {
		if c.Base64Secret {
			return decodeBase64(c.Secret)
		}
		return []byte(c.Secret), nil
	}
	return publicKey(c.Algorithm, c.PublicKey)
}
