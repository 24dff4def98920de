package conf

import "encoding/json"

// Service is APISIX's service object: upstream, plugins and hosts shared by routes.
type Service struct {
	ID              ID                         `json:"id,omitempty"`
	Name            string                     `json:"name,omitempty"`
	Desc            string                     `json:"desc,omitempty"`
	Labels          map[string]string          `json:"labels,omitempty"`
	Upstream        *Upstream                  `json:"upstream,omitempty"`
	UpstreamID      ID                         `json:"upstream_id,omitempty"`
	Plugins         map[string]json.RawMessage `json:"plugins,omitempty"`
	Hosts           []string                   `json:"hosts,omitempty"`
	EnableWebsocket bool                       `json:"enable_websocket,omitempty"`
	CreateTime      int64                      `json:"create_time,omitempty"`
	UpdateTime      int64                      `json:"update_time,omitempty"`
}

// MarshalJSON keeps an empty "plugins": {}, as Route's does.
func (s Service) MarshalJSON() ([]byte, error) {
	type plain Service
	return json.Marshal(struct {
		plain
		Plugins *map[string]json.RawMessage `json:"plugins,omitempty"`
	}{plain(s), presentMap(s.Plugins)})
}

// DecodeService decodes and validates one service.
func DecodeService(data []byte) (*Service, error) {
	raw, err := document(data)
	if err != nil {
		return nil, err
	}
	var s Service
	if _, err := serviceFields.decode(&s, "", raw); err != nil {
		return nil, err
	}
	return &s, nil
}

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
