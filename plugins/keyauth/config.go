package keyauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"gw/plugins"
)

// Name is the key under a route's or a consumer's "plugins" object.
const Name = "key-auth"

// Priority places key-auth in the chain as APISIX does (higher runs first).
const Priority = 2500

func init() {
	plugins.Register(plugins.Plugin{
		Name:     Name,
		Priority: Priority,
		Validate: func(raw json.RawMessage) error {
			_, err := Parse(raw)
			return err
		},
		Build: build,
	})
}

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
	Key string `json:"key"`
}

// Parse decodes a route's key-auth configuration strictly and applies the defaults.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{Header: "apikey", Query: "apikey", Realm: "key"}
	for _, m := range members {
		switch m.name {
		case "header":
			c.Header, err = nonEmptyString(m)
		case "query":
			c.Query, err = nonEmptyString(m)
		case "hide_credentials":
			c.HideCredentials, err = boolean(m)
		case "realm":
			c.Realm, err = realm(m)
		case "anonymous_consumer":
			c.AnonymousConsumer, err = nonEmptyString(m)
		case "_meta":
			err = isObject(m)
		default:
			err = fmt.Errorf("%s: unknown field; known fields: header, query, hide_credentials, realm, anonymous_consumer", m.name)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ParseConsumer decodes a consumer's key-auth configuration strictly.
func ParseConsumer(raw json.RawMessage) (*ConsumerConfig, error) {
	members, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	c := &ConsumerConfig{}
	hasKey := false
	for _, m := range members {
		switch m.name {
		case "key":
			// APISIX allows "", which no request can ever present: refuse it.
			c.Key, err = nonEmptyString(m)
			hasKey = true
		default:
			err = fmt.Errorf("%s: unknown field; a consumer's key-auth has only \"key\"", m.name)
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

// ValidateConsumer checks a consumer's key-auth configuration, for the Admin API.
func ValidateConsumer(raw json.RawMessage) error {
	_, err := ParseConsumer(raw)
	return err
}

// member is one name/value pair of a JSON object, in document order.
type member struct {
	name  string
	value json.RawMessage
}

// objectMembers splits a JSON object into its members, refusing anything else and a
// repeated name (encoding/json would silently keep the last).
func objectMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("configuration must be a JSON object, got %s", show(raw))
	}
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: appears twice; keep one", name)
		}
		seen[name] = true
		members = append(members, member{name, value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the object")
	}
	return members, nil
}

func nonEmptyString(m member) (string, error) {
	var s string
	if len(m.value) == 0 || m.value[0] != '"' || json.Unmarshal(m.value, &s) != nil {
		return "", fmt.Errorf("%s: must be a string, got %s", m.name, show(m.value))
	}
	if s == "" {
		return "", fmt.Errorf("%s: must not be empty", m.name)
	}
	return s, nil
}

func boolean(m member) (bool, error) {
	switch string(m.value) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: must be a boolean, got %s", m.name, show(m.value))
}

func isObject(m member) error {
	if len(m.value) == 0 || m.value[0] != '{' {
		return fmt.Errorf("%s: must be an object, got %s", m.name, show(m.value))
	}
	return nil
}

// realm is APISIX's realm schema: 1–128 printable ASCII characters, neither '"' nor '\',
// since it is written inside a quoted string of the WWW-Authenticate header.
func realm(m member) (string, error) {
	s, err := nonEmptyString(m)
	if err != nil {
		return "", err
	}
	ok := len(s) <= 128
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] >= 0x20 && s[i] <= 0x7e && s[i] != '"' && s[i] != '\\'
	}
	if !ok {
		return "", fmt.Errorf("%s: must be 1-128 printable ASCII characters without '\"' or '\\', got %s", m.name, show(m.value))
	}
	return s, nil
}

// show renders a JSON value for a message, cut short if long.
func show(v json.RawMessage) string {
	const maxShown = 40
	if len(v) > maxShown {
		return string(v[:maxShown]) + "..."
	}
	return string(v)
}
