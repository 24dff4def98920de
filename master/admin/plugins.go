package admin

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"gw/plugins"
)

// describe answers APISIX's read-only plugin endpoints (apisix/admin/plugins.lua and
// schema.lua), under /apisix/admin/<collection>/<rest>:
//
//	GET plugins/list                         the plugins' names, highest priority first
//	GET plugins/{name}                       the plugin's schema on a route or service
//	GET schema/plugins/{name}                the same (APISIX routes both to one function)
//	GET ...{name}?schema_type=consumer       the schema of a consumer's configuration
//	GET plugins?all=true                     every plugin: priority, schemas, type
//	GET ...{name}?schema_type=metadata       the schema of its plugin_metadata
//
// They need a key like every admin endpoint: APISIX checks the token before it routes.
// Other methods get APISIX's 404 {"error_msg":"not found"} for a resource without them.
func describe(method, collection, rest string, query url.Values) (int, any) {
	if method != http.MethodGet {
		return http.StatusNotFound, errorBody{ErrorMsg: "not found"}
	}
	name, _, _ := strings.Cut(rest, "/")
	if collection == "schema" {
		kind, sub, _ := strings.Cut(rest, "/")
		if kind != "plugins" {
			// APISIX's schema.lua answers the schemas of its objects here (route, upstream,
			// ...); gw publishes the plugins' only.
			return badRequest("not found schema: " + kind + "; the schemas of objects are not supported yet, " +
				"those of plugins are at " + Prefix + "/schema/plugins/{name}")
		}
		name, _, _ = strings.Cut(sub, "/")
	}
	subsystem := query.Get("subsystem")
	if query.Get("all") == "true" && collection == "plugins" {
		// Deprecated in APISIX ("query parameter \"all\" will be deprecated soon"), still
		// what APISIX Dashboard reads. APISIX ignores the name here, so does gw.
		return allPlugins(subsystem)
	}
	if collection == "plugins" && name == "list" {
		return pluginList(subsystem)
	}
	if subsystem == "" {
		subsystem = "http"
	}
	if subsystem != "http" && subsystem != "stream" {
		return badRequest("unsupported subsystem: " + subsystem)
	}
	p, known := plugins.Lookup(name)
	if !known || subsystem != "http" { // gw has no stream plugins
		return http.StatusNotFound, errorBody{ErrorMsg: "plugin not found in subsystem " + subsystem}
	}
	var schema []byte
	switch query.Get("schema_type") {
	case "consumer":
		if d, ok := p.(plugins.ConsumerDescribed); ok {
			schema = d.ConsumerSchema()
		}
	case "metadata":
		if m, ok := p.(plugins.MetadataOwner); ok {
			schema = m.MetadataSchema()
		}
	default:
		if d, ok := p.(plugins.Described); ok {
			schema = d.Schema()
		}
	}
	if schema == nil {
		return badRequest("not found schema")
	}
	return http.StatusOK, json.RawMessage(schema)
}

// pluginList is APISIX's GET /apisix/admin/plugins/list: the names of the plugins this
// gateway runs, highest priority first; none for the stream subsystem, which gw lacks.
func pluginList(subsystem string) (int, any) {
	switch subsystem {
	case "", "http":
	case "stream":
		return http.StatusOK, []string{}
	default:
		return badRequest("invalid subsystem passed")
	}
	names := plugins.Names()
	priority := func(name string) int {
		p, _ := plugins.Lookup(name)
		return p.Priority()
	}
	slices.SortStableFunc(names, func(a, b string) int { return priority(b) - priority(a) })
	return http.StatusOK, names
}

// pluginInfo is one plugin in APISIX's GET /apisix/admin/plugins?all=true (plugin.get_all
// with version, priority, schema, metadata_schema, consumer_schema, type and scope):
// members a plugin lacks are left out, as APISIX leaves out nil ones. gw's plugins have
// no version, so that member never appears.
type pluginInfo struct {
	Priority       int             `json:"priority"`
	Schema         json.RawMessage `json:"schema,omitempty"`
	MetadataSchema json.RawMessage `json:"metadata_schema,omitempty"`
	ConsumerSchema json.RawMessage `json:"consumer_schema,omitempty"`
	// Type is "auth" for the plugins a consumer holds a credential of, as APISIX's.
	Type string `json:"type,omitempty"`
}

// allPlugins answers plugins?all=true from the registry: each schema is the one
// Validate is held to (plugins/all/schema_test.go), never a copy kept beside it.
func allPlugins(subsystem string) (int, any) {
	switch subsystem {
	case "", "http":
	case "stream":
		return http.StatusOK, map[string]pluginInfo{} // gw has no stream plugins
	default:
		return badRequest("unsupported subsystem: " + subsystem)
	}
	all := map[string]pluginInfo{}
	for _, name := range plugins.Names() {
		p, _ := plugins.Lookup(name)
		info := pluginInfo{Priority: p.Priority()}
		if d, ok := p.(plugins.Described); ok {
			info.Schema = d.Schema()
		}
		if m, ok := p.(plugins.MetadataOwner); ok {
			info.MetadataSchema = m.MetadataSchema()
		}
		if d, ok := p.(plugins.ConsumerDescribed); ok {
			info.ConsumerSchema = d.ConsumerSchema()
		}
		if _, ok := p.(plugins.ConsumerAuth); ok {
			info.Type = "auth"
		}
		all[name] = info
	}
	return http.StatusOK, all
}
