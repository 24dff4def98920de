package keyauth

import (
	"encoding/json"
	"errors"
	"fmt"

	"gw/plugins"
	"gw/plugins/authn"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's or a consumer's "plugins" object.
const Name = "key-auth"

// Priority places key-auth in the chain as APISIX does (higher runs first).
const Priority = 2500

func init() { plugins.Register(plugin{}) }

// plugin is key-auth as the host sees it: an authentication plugin whose instances
// share one index of the snapshot's keys (handler.go).
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

// ValidateConsumer checks a consumer's key-auth configuration, for the Admin API.
func (plugin) ValidateConsumer(raw json.RawMessage) error {
	_, err := ParseConsumer(raw)
	return err
}

// CredentialField is the key: no two consumers may have one key.
func (plugin) CredentialField() string { return "key" }

// SecretFields: a consumer's key may be "$env://NAME", which the master resolves.
func (plugin) SecretFields() []string { return []string{"key"} }

// Config is key-auth's configuration on a route or service, with APISIX's defaults.
type Config struct {
	// Header is the request header holding the key; it is looked at first.
	Header string `json:"header"`
	// Query is the query argument holding the key when the header is missing.
	Query string `json:"query"`
	// HideCredentials removes the key (header or argument) before proxying.
	HideCredentials bool `json:"hide_credentials"`
	// Realm goes into the WWW-Authenticate challenge of a 401.
	Realm string `json:"realm"`
	// AnonymousConsumer, when set, is the consumer a request without a valid key runs as.
	AnonymousConsumer string `json:"anonymous_consumer,omitempty"`
}

// ConsumerConfig is key-auth's configuration on a consumer: its key.
type ConsumerConfig struct {
	// Key is the key itself, or a secret reference ("$env://NAME") that the master
	// replaces with its value before workers see it.
	Key string `json:"key"`
}

// Parse decodes a route's key-auth configuration strictly and applies the defaults.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{Header: "apikey", Query: "apikey", Realm: "key"}
	for _, m := range members {
		switch m.Name {
		case "header":
			c.Header, err = m.NonEmptyString()
		case "query":
			c.Query, err = m.NonEmptyString()
		case "hide_credentials":
			c.HideCredentials, err = m.Bool()
		case "realm":
			c.Realm, err = authn.Realm(m)
		case "anonymous_consumer":
			c.AnonymousConsumer, err = m.NonEmptyString()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: header, query, hide_credentials, realm, anonymous_consumer", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ParseConsumer decodes a consumer's key-auth configuration strictly.
func ParseConsumer(raw json.RawMessage) (*ConsumerConfig, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &ConsumerConfig{}
	hasKey := false
	for _, m := range members {
		switch m.Name {
		case "key":
			// APISIX allows "", which no request can ever present: refuse it.
			if c.Key, err = m.NonEmptyString(); err == nil {
				err = authn.CheckSecretRef(m.Name, c.Key)
			}
			hasKey = true
		default:
			err = fmt.Errorf("%s: unknown field; a consumer's key-auth has only \"key\"", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasKey {
		return nil, errors.New("key: is required (the API key this consumer presents)")
	}
	return c, nil
}
