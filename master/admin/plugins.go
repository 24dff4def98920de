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
	if query.Get("all") == "true" {
		// Deprecated in APISIX ("query parameter \"all\" will be deprecated soon").
		return badRequest("all=true is not supported yet; GET " + Prefix + "/plugins/list, then " + Prefix + "/plugins/{name} for each")
	}
	subsystem := query.Get("subsystem")
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
