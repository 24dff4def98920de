package conf

import (
	"encoding/json"
	"fmt"
)

// routeFields is APISIX's route schema (schema_def.lua _M.route): additionalProperties is
// false, so any other field is rejected.
var routeFields = fieldDecoders[Route]{
	"id":               into(func(r *Route) *ID { return &r.ID }, parseID),
	"name":             into(func(r *Route) *string { return &r.Name }, readName),
	"desc":             into(func(r *Route) *string { return &r.Desc }, readDesc),
	"labels":           intoAt(func(r *Route) *map[string]string { return &r.Labels }, decodeLabels),
	"uri":              into(func(r *Route) *string { return &r.URI }, readURI),
	"uris":             into(func(r *Route) *[]string { return &r.URIs }, readURIs),
	"methods":          into(func(r *Route) *[]string { return &r.Methods }, readMethods),
	"host":             into(func(r *Route) *string { return &r.Host }, readHost),
	"hosts":            into(func(r *Route) *[]string { return &r.Hosts }, readHosts),
	"remote_addr":      into(func(r *Route) *string { return &r.RemoteAddr }, readRemoteAddr),
	"remote_addrs":     into(func(r *Route) *[]string { return &r.RemoteAddrs }, readRemoteAddrs),
	"priority":         into(func(r *Route) *int { return &r.Priority }, asInt),
	"status":           into(func(r *Route) **int { return &r.Status }, optional(readStatus)),
	"plugins":          into(func(r *Route) *map[string]json.RawMessage { return &r.Plugins }, readPlugins),
	"service_id":       into(func(r *Route) *ID { return &r.ServiceID }, parseID),
	"upstream_id":      into(func(r *Route) *ID { return &r.UpstreamID }, parseID),
	"upstream":         intoAt(func(r *Route) **Upstream { return &r.Upstream }, decodeUpstreamAt),
	"timeout":          intoAt(func(r *Route) **Timeout { return &r.Timeout }, decodeTimeout),
	"enable_websocket": into(func(r *Route) *bool { return &r.EnableWebsocket }, asBool),
	"create_time":      into(func(r *Route) *int64 { return &r.CreateTime }, asInteger),
	"update_time":      into(func(r *Route) *int64 { return &r.UpdateTime }, asInteger),

	// APISIX has these and gw does not yet (vars matching arrives with a later issue; Lua
	// filter_func and script are out of scope).
	"vars":             nil,
	"filter_func":      nil,
	"script":           nil,
	"script_id":        nil,
	"plugin_config_id": nil,
}

func readStatus(raw json.RawMessage) (int, error) {
	status, err := asInt(raw)
	if err == nil && status != 0 && status != 1 {
		err = fmt.Errorf("matches none of the enum values (0, 1), got %d", status)
	}
	return status, err
}

// validate checks the rules that span several route fields. Each field's own value was
// checked while decoding, where an empty string could still be told from a missing one.
func (r *Route) validate() error {
	switch {
	case r.URI == "" && r.URIs == nil:
		return &ObjectError{Path: "uri", Reason: `is required (or "uris")`}
	case r.URI != "" && r.URIs != nil:
		return &ObjectError{Path: "uris", Reason: "only one of uri or uris is allowed"}
	case r.Host != "" && r.Hosts != nil:
		return &ObjectError{Path: "hosts", Reason: "only one of host or hosts is allowed"}
	case r.RemoteAddr != "" && r.RemoteAddrs != nil:
		return &ObjectError{Path: "remote_addrs", Reason: "only one of remote_addr or remote_addrs is allowed"}
	case r.Plugins == nil && r.Upstream == nil && r.UpstreamID == "" && r.ServiceID == "":
		return &ObjectError{Reason: `a route needs at least one of "plugins", "upstream", "upstream_id" or "service_id"`}
	}
	return nil
}
