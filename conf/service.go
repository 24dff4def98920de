package conf

import "encoding/json"

// serviceFields is APISIX's service schema (schema_def.lua _M.service):
// additionalProperties is false, so any other field is rejected.
var serviceFields = fieldDecoders[Service]{
	"id":               into(func(s *Service) *ID { return &s.ID }, parseID),
	"name":             into(func(s *Service) *string { return &s.Name }, readName),
	"desc":             into(func(s *Service) *string { return &s.Desc }, readDesc),
	"labels":           intoAt(func(s *Service) *map[string]string { return &s.Labels }, decodeLabels),
	"upstream":         intoAt(func(s *Service) **Upstream { return &s.Upstream }, decodeUpstreamAt),
	"upstream_id":      into(func(s *Service) *ID { return &s.UpstreamID }, parseID),
	"plugins":          into(func(s *Service) *map[string]json.RawMessage { return &s.Plugins }, readPlugins),
	"hosts":            into(func(s *Service) *[]string { return &s.Hosts }, readHosts),
	"enable_websocket": into(func(s *Service) *bool { return &s.EnableWebsocket }, asBool),
	"create_time":      into(func(s *Service) *int64 { return &s.CreateTime }, asInteger),
	"update_time":      into(func(s *Service) *int64 { return &s.UpdateTime }, asInteger),

	// APISIX has it and gw does not yet.
	"script": nil,
}
