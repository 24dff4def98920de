package conf

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// Route is APISIX's route object.
type Route struct {
	ID              ID                         `json:"id,omitempty"`
	Name            string                     `json:"name,omitempty"`
	Desc            string                     `json:"desc,omitempty"`
	Labels          map[string]string          `json:"labels,omitempty"`
	URI             string                     `json:"uri,omitempty"`
	URIs            []string                   `json:"uris,omitempty"`
	Methods         []string                   `json:"methods,omitempty"`
	Host            string                     `json:"host,omitempty"`
	Hosts           []string                   `json:"hosts,omitempty"`
	RemoteAddr      string                     `json:"remote_addr,omitempty"`
	RemoteAddrs     []string                   `json:"remote_addrs,omitempty"`
	Vars            json.RawMessage            `json:"vars,omitempty"`
	Priority        int                        `json:"priority,omitempty"`
	Plugins         map[string]json.RawMessage `json:"plugins,omitempty"`
	PluginConfigID  ID                         `json:"plugin_config_id,omitempty"`
	ServiceID       ID                         `json:"service_id,omitempty"`
	UpstreamID      ID                         `json:"upstream_id,omitempty"`
	Upstream        *Upstream                  `json:"upstream,omitempty"`
	Timeout         *Timeout                   `json:"timeout,omitempty"`
	EnableWebsocket bool                       `json:"enable_websocket,omitempty"`
	// Status is 1 (enabled, the default) or 0 (left out of the router).
	Status     *int  `json:"status,omitempty"`
	CreateTime int64 `json:"create_time,omitempty"`
	UpdateTime int64 `json:"update_time,omitempty"`
}

// Enabled reports whether the route takes part in routing: status unset or 1.
func (r *Route) Enabled() bool {
	return r.Status == nil || *r.Status == 1
}

// Paths returns the route's uri or uris, whichever it has.
func (r *Route) Paths() []string {
	if r.URI != "" {
		return []string{r.URI}
	}
	return r.URIs
}

// MarshalJSON keeps an empty "plugins": {}, which omitempty would drop: a route with
// only empty plugins is valid, and without them it would no longer decode.
func (r Route) MarshalJSON() ([]byte, error) {
	type plain Route // plain has the fields and tags but not this method
	return json.Marshal(struct {
		plain
		Plugins *map[string]json.RawMessage `json:"plugins,omitempty"`
	}{plain(r), presentMap(r.Plugins)})
}

// DecodeRoute decodes and validates one route as the Admin API received it. Every error
// is an *ObjectError naming the offending field, in APISIX's wording where APISIX has one,
// except for a vars expression that does not compile: that is a *VarsError, which APISIX
// words without the "invalid configuration" prefix.
// The route's plugin configurations are kept raw; the plugin registry checks them.
func DecodeRoute(data []byte) (*Route, error) {
	raw, err := document(data)
	if err != nil {
		return nil, err
	}
	var r Route
	if _, err := routeFields.decode(&r, "", raw); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

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
	"plugin_config_id": into(func(r *Route) *ID { return &r.PluginConfigID }, parseID),
	"upstream_id":      into(func(r *Route) *ID { return &r.UpstreamID }, parseID),
	"upstream":         intoAt(func(r *Route) **Upstream { return &r.Upstream }, decodeUpstreamAt),
	"timeout":          intoAt(func(r *Route) **Timeout { return &r.Timeout }, decodeTimeout),
	"enable_websocket": into(func(r *Route) *bool { return &r.EnableWebsocket }, asBool),
	"create_time":      into(func(r *Route) *int64 { return &r.CreateTime }, asInteger),
	"update_time":      into(func(r *Route) *int64 { return &r.UpdateTime }, asInteger),
	// vars is only checked to be an array here, as APISIX's schema does; validate compiles
	// it and answers in APISIX's words.
	"vars": into(func(r *Route) *json.RawMessage { return &r.Vars }, readVars),

	// APISIX has these and gw does not (Lua filter_func and script are out of scope).
	"filter_func": nil,
	"script":      nil,
	"script_id":   nil,
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
	case r.Plugins == nil && r.Upstream == nil && r.UpstreamID == "" && r.ServiceID == "" && r.PluginConfigID == "":
		return &ObjectError{Reason: `a route needs at least one of "plugins", "upstream", "upstream_id", "service_id" or "plugin_config_id"`}
	}
	for i, p := range r.Paths() {
		if err := checkPathWildcards(p); err != nil {
			field := "uri"
			if r.URIs != nil {
				field = fmt.Sprintf("uris[%d]", i)
			}
			return &ObjectError{Path: field, Reason: err.Error()}
		}
	}
	// APISIX compiles vars after the schema check (admin/routes.lua check_conf) and
	// answers without the "invalid configuration" prefix; a *VarsError keeps that wording.
	if _, err := ParseVars(r.Vars); err != nil {
		return err
	}
	return nil
}

// readVars accepts any JSON array and keeps it in canonical form; its content is
// compiled by validate.
func readVars(raw json.RawMessage) (json.RawMessage, error) {
	if jsonKind(raw) != "array" {
		return nil, wrongType("array", raw)
	}
	return canonicalJSON(raw), nil
}

// checkPathWildcards refuses a '*' the router cannot place: one is allowed as the last
// character ("/api/*", "/blog/bar*", a prefix match) or at the start of a path segment
// ("/files/*path", "/a/*/b", which match any text there, slashes included).
func checkPathWildcards(p string) error {
	for i := 0; i < len(p); i++ {
		if p[i] == '*' && i != len(p)-1 && (i == 0 || p[i-1] != '/') {
			return fmt.Errorf(`'*' is allowed only at the end of the path or at the start of a segment ("/api/*", "/files/*name"), got %q`, p)
		}
	}
	return nil
}

// RemoteAddrPrefixes returns remote_addr or remote_addrs as prefixes (a plain address
// covers itself alone), nil when the route has neither. Decoding already checked them,
// so an error means the route did not come through DecodeRoute.
func (r *Route) RemoteAddrPrefixes() ([]netip.Prefix, error) {
	addrs := r.RemoteAddrs
	if r.RemoteAddr != "" {
		addrs = []string{r.RemoteAddr}
	}
	if len(addrs) == 0 {
		return nil, nil
	}
	prefixes := make([]netip.Prefix, len(addrs))
	for i, s := range addrs {
		p, err := ParseAddrOrPrefix(s)
		if err != nil {
			return nil, fmt.Errorf("remote_addrs: %w", err)
		}
		prefixes[i] = p
	}
	return prefixes, nil
}
