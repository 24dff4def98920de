package basicauth

import (
	"encoding/json"
	"errors"
	"fmt"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/authn"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's or a consumer's "plugins" object.
const Name = "basic-auth"

// Priority places basic-auth in the chain as APISIX does (higher runs first).
const Priority = 2520

func init() { plugins.Register(plugin{}) }

// plugin is basic-auth as the host sees it: an authentication plugin whose instances
// share one index of the snapshot's usernames (handler.go).
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

// ValidateConsumer checks a consumer's basic-auth configuration, for the Admin API.
func (plugin) ValidateConsumer(raw json.RawMessage) error {
	_, err := ParseConsumer(raw)
	return err
}

// CredentialField is the username: no two consumers may have one.
func (plugin) CredentialField() string { return "username" }

// SecretFields: a consumer's password may be "$env://NAME", which the master resolves.
func (plugin) SecretFields() []string { return []string{"password"} }

// Config is basic-auth's configuration on a route or service, with APISIX's defaults.
type Config struct {
	// HideCredentials removes the Authorization header before proxying.
	HideCredentials bool `json:"hide_credentials"`
	// Realm goes into the WWW-Authenticate challenge of a 401.
	Realm string `json:"realm"`
	// AnonymousConsumer, when set, is the consumer a request without valid credentials
	// runs as.
	AnonymousConsumer string `json:"anonymous_consumer,omitempty"`
}

// ConsumerConfig is basic-auth's configuration on a consumer: its credentials.
type ConsumerConfig struct {
	Username string `json:"username"`
	// Password is the password itself, or a secret reference ("$env://NAME") that the
	// master replaces with its value before workers see it.
	Password string `json:"password"`
}

// Parse decodes a route's basic-auth configuration strictly and applies the defaults.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{Realm: "basic"}
	for _, m := range members {
		switch m.Name {
		case "hide_credentials":
			c.HideCredentials, err = m.Bool()
		case "realm":
			c.Realm, err = authn.Realm(m)
		case "anonymous_consumer":
			c.AnonymousConsumer, err = m.NonEmptyString()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: hide_credentials, realm, anonymous_consumer", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ParseConsumer decodes a consumer's basic-auth configuration strictly.
func ParseConsumer(raw json.RawMessage) (*ConsumerConfig, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &ConsumerConfig{}
	var hasUsername, hasPassword bool
	for _, m := range members {
		switch m.Name {
		case "username":
			c.Username, err = credential(m)
			hasUsername = true
		case "password":
			c.Password, err = credential(m)
			hasPassword = true
		default:
			err = fmt.Errorf("%s: unknown field; a consumer's basic-auth has only \"username\" and \"password\"", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case !hasUsername:
		return nil, errors.New("username: is required")
	case !hasPassword:
		return nil, errors.New("password: is required")
	}
	return c, nil
}

// credential reads a username or password. APISIX removes white space from what a
// request presents, so a stored value with white space (or a username with ':') could
// never match: it is refused here instead of failing every request later.
func credential(m pluginconf.Member) (string, error) {
	s, err := m.NonEmptyString()
	if err != nil {
		return "", err
	}
	if m.Name == "username" && conf.IsSecretRef(s) {
		// The username finds the consumer, so it is not a secret; taken as written it
		// would be a username no one means to type.
		return "", fmt.Errorf("%s: a secret reference is accepted only in password, got %s", m.Name, m.Show())
	}
	if err := authn.CheckSecretRef(m.Name, s); err != nil {
		return "", err
	}
	for i := 0; i < len(s); i++ {
		switch {
		case isSpace(s[i]):
			return "", fmt.Errorf("%s: must not contain white space, got %s", m.Name, m.Show())
		case s[i] == ':' && m.Name == "username":
			return "", fmt.Errorf("%s: must not contain ':', got %s", m.Name, m.Show())
		}
	}
	return s, nil
}
