package conf

import "encoding/json"

// GlobalRule is APISIX's global_rule object: plugins run for every request on the data
// port, whether a route matched or not.
type GlobalRule struct {
	ID         ID                         `json:"id"`
	Plugins    map[string]json.RawMessage `json:"plugins"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
}

// globalRuleFields is APISIX's global_rule schema (schema_def.lua _M.global_rule).
var globalRuleFields = fieldDecoders[GlobalRule]{
	"id":          into(func(g *GlobalRule) *ID { return &g.ID }, parseID),
	"plugins":     into(func(g *GlobalRule) *map[string]json.RawMessage { return &g.Plugins }, readPlugins),
	"create_time": into(func(g *GlobalRule) *int64 { return &g.CreateTime }, asInteger),
	"update_time": into(func(g *GlobalRule) *int64 { return &g.UpdateTime }, asInteger),
}

// DecodeGlobalRule decodes and validates one global_rule; like a plugin_config it must
// have "id" and "plugins".
func DecodeGlobalRule(data []byte) (*GlobalRule, error) {
	raw, err := document(data)
	if err != nil {
		return nil, err
	}
	var g GlobalRule
	members, err := globalRuleFields.decode(&g, "", raw)
	if err != nil {
		return nil, err
	}
	if err := require(members, "", "id", "plugins"); err != nil {
		return nil, err
	}
	return &g, nil
}
