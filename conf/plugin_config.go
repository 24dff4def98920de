package conf

import "encoding/json"

// pluginConfigFields is APISIX's plugin_config schema (schema_def.lua _M.plugin_config):
// additionalProperties is false, so any other field is rejected.
var pluginConfigFields = fieldDecoders[PluginConfig]{
	"id":          into(func(p *PluginConfig) *ID { return &p.ID }, parseID),
	"name":        into(func(p *PluginConfig) *string { return &p.Name }, readName),
	"desc":        into(func(p *PluginConfig) *string { return &p.Desc }, readDesc),
	"labels":      intoAt(func(p *PluginConfig) *map[string]string { return &p.Labels }, decodeLabels),
	"plugins":     into(func(p *PluginConfig) *map[string]json.RawMessage { return &p.Plugins }, readPlugins),
	"create_time": into(func(p *PluginConfig) *int64 { return &p.CreateTime }, asInteger),
	"update_time": into(func(p *PluginConfig) *int64 { return &p.UpdateTime }, asInteger),
}

// globalRuleFields is APISIX's global_rule schema (schema_def.lua _M.global_rule).
var globalRuleFields = fieldDecoders[GlobalRule]{
	"id":          into(func(g *GlobalRule) *ID { return &g.ID }, parseID),
	"plugins":     into(func(g *GlobalRule) *map[string]json.RawMessage { return &g.Plugins }, readPlugins),
	"create_time": into(func(g *GlobalRule) *int64 { return &g.CreateTime }, asInteger),
	"update_time": into(func(g *GlobalRule) *int64 { return &g.UpdateTime }, asInteger),
}

// DecodePluginConfig decodes and validates one plugin_config. APISIX's schema requires
// "id" and "plugins" (the Admin API puts the path's id into the body before checking).
// The plugin configurations are kept raw; the plugin registry checks them.
func DecodePluginConfig(data []byte) (*PluginConfig, error) {
	raw, err := document(data)
	if err != nil {
		return nil, err
	}
	var p PluginConfig
	members, err := pluginConfigFields.decode(&p, "", raw)
	if err != nil {
		return nil, err
	}
	if err := require(members, "", "id", "plugins"); err != nil {
		return nil, err
	}
	return &p, nil
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
