package conf

import "encoding/json"

// PluginConfig is APISIX's plugin_config object: a set of plugins that routes reuse by
// plugin_config_id. Plugin configurations are kept raw, for the plugin registry.
type PluginConfig struct {
	ID         ID                         `json:"id"`
	Name       string                     `json:"name,omitempty"`
	Desc       string                     `json:"desc,omitempty"`
	Labels     map[string]string          `json:"labels,omitempty"`
	Plugins    map[string]json.RawMessage `json:"plugins"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
}

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
