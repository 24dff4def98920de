package conf

import (
	"encoding/json"
	"fmt"
)

// Consumer is APISIX's consumer object: a named client whose auth plugins hold its
// credentials (key-auth's key, basic-auth's username and password). Its id is its
// username. Plugin configurations are kept raw, for the plugins to read.
type Consumer struct {
	Username   string                     `json:"username"`
	Desc       string                     `json:"desc,omitempty"`
	Labels     map[string]string          `json:"labels,omitempty"`
	Plugins    map[string]json.RawMessage `json:"plugins,omitempty"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
}

// MarshalJSON keeps an empty "plugins": {}, as Route's does.
func (c Consumer) MarshalJSON() ([]byte, error) {
	type plain Consumer
	return json.Marshal(struct {
		plain
		Plugins *map[string]json.RawMessage `json:"plugins,omitempty"`
	}{plain(c), presentMap(c.Plugins)})
}

// consumerFields is APISIX's consumer schema (schema_def.lua _M.consumer):
// additionalProperties is false, so any other field is rejected.
var consumerFields = fieldDecoders[Consumer]{
	"username":    into(func(c *Consumer) *string { return &c.Username }, readUsername),
	"desc":        into(func(c *Consumer) *string { return &c.Desc }, readDesc),
	"labels":      intoAt(func(c *Consumer) *map[string]string { return &c.Labels }, decodeLabels),
	"plugins":     into(func(c *Consumer) *map[string]json.RawMessage { return &c.Plugins }, readPlugins),
	"create_time": into(func(c *Consumer) *int64 { return &c.CreateTime }, asInteger),
	"update_time": into(func(c *Consumer) *int64 { return &c.UpdateTime }, asInteger),
	// APISIX's schema allows an "id" and ignores it: the username is the id. It is checked
	// and dropped.
	"id": func(_ *Consumer, _ string, raw json.RawMessage) error {
		_, err := parseID(raw)
		return err
	},

	// APISIX has it and gw does not yet (consumer groups).
	"group_id": nil,
}

// DecodeConsumer decodes and validates one consumer. The plugin configurations are kept
// raw: auth plugins check them with their consumer schema, the others with their route
// schema, and the Admin API checks that no two consumers share a credential.
func DecodeConsumer(data []byte) (*Consumer, error) {
	raw, err := document(data)
	if err != nil {
		return nil, err
	}
	var c Consumer
	members, err := consumerFields.decode(&c, "", raw)
	if err != nil {
		return nil, err
	}
	if err := require(members, "", "username"); err != nil {
		return nil, err
	}
	return &c, nil
}

// maxUsernameLength is APISIX's rule_name_def maxLength, which username shares.
const maxUsernameLength = 256

// readUsername is APISIX's ^[a-zA-Z0-9_\-]+$, 1–256 characters.
func readUsername(raw json.RawMessage) (string, error) {
	return checkedString(raw, CheckUsername)
}

// CheckUsername checks a consumer's username, which is also its id in the Admin API
// path: 1–256 characters of [a-zA-Z0-9_-].
func CheckUsername(s string) error {
	ok := s != "" && len(s) <= maxUsernameLength
	for i := 0; ok && i < len(s); i++ {
		ok = isAlnum(s[i]) || s[i] == '_' || s[i] == '-'
	}
	if !ok {
		return fmt.Errorf("must be 1-%d characters from [a-zA-Z0-9_-], got %q", maxUsernameLength, s)
	}
	return nil
}
