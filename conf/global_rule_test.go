package conf

import (
	"encoding/json"
	"testing"
)

func TestDecodeGlobalRuleAccepts(t *testing.T) {
	cases := map[string]accepted[GlobalRule]{
		"id and plugins": {`{"id":"1","plugins":{}}`, GlobalRule{ID: "1", Plugins: map[string]json.RawMessage{}}},
		"integer id":     {`{"id":3,"plugins":{"prometheus":{}}}`, GlobalRule{ID: "3", Plugins: map[string]json.RawMessage{"prometheus": json.RawMessage(`{}`)}}},
		"times":          {`{"id":"g","plugins":{},"create_time":1,"update_time":2}`, GlobalRule{ID: "g", Plugins: map[string]json.RawMessage{}, CreateTime: 1, UpdateTime: 2}},
	}
	testAccepts(t, DecodeGlobalRule, cases)
}

func TestDecodeGlobalRuleRejects(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"not JSON":            {`{`, "malformed JSON"},
		"null":                {`null`, "wrong type: expected object"},
		"no plugins":          {`{"id":"1"}`, `property "plugins" validation failed: is required`},
		"no id":               {`{"plugins":{}}`, `property "id" validation failed: is required`},
		"plugins not object":  {`{"id":"1","plugins":"x"}`, `property "plugins" validation failed: wrong type`},
		"bad id":              {`{"id":0,"plugins":{}}`, `property "id" validation failed`},
		"name is not a field": {`{"id":"1","plugins":{},"name":"n"}`, `property "name" validation failed: unknown field`},
		"update_time float":   {`{"id":"1","plugins":{},"update_time":1.5}`, `property "update_time" validation failed`},
	}
	testRejects(t, DecodeGlobalRule, cases)
}
