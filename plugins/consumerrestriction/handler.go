package consumerrestriction

import (
	"encoding/json"
	"net/http"
	"slices"

	"gw/plugins"
)

// Build compiles a route's configuration; the compiled Config is the instance.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	return Parse(raw)
}

var (
	_ plugins.AccessPhase   = (*Config)(nil)
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: consumer-restriction only lets a request through or answers it.
func (plugin) KeepsRequest() bool { return true }

var contentTypeJSON = []byte("application/json")

// Access judges the request's subject as APISIX does: a request without one (no consumer
// yet, a route without a service) is a 401; then the blacklist refuses, the whitelist
// admits only its own, and allowed_by_methods holds the subjects not whitelisted to
// their methods.
func (c *Config) Access(pc *plugins.Ctx) error {
	var value string
	switch c.Subject {
	case ConsumerName:
		value = pc.Consumer
	case ServiceID:
		if pc.Route != nil {
			value = pc.Route.ServiceID
		}
	case RouteID:
		if pc.Route != nil {
			value = pc.Route.ID
		}
	}
	if value == "" {
		pc.Respond(http.StatusUnauthorized, contentTypeJSON, c.unknownBody)
		return nil
	}
	if slices.Contains(c.Blacklist, value) {
		pc.Respond(c.RejectedCode, contentTypeJSON, c.rejectedBody)
		return nil
	}
	whitelisted := c.Whitelist != nil && slices.Contains(c.Whitelist, value)
	block := c.Whitelist != nil && !whitelisted
	if !whitelisted && !c.methodAllowed(pc.Method(), value) {
		block = true
	}
	if block {
		pc.Respond(c.RejectedCode, contentTypeJSON, c.rejectedBody)
	}
	return nil
}

// methodAllowed is APISIX's is_method_allowed: the first item naming value decides; a
// value no item names may use every method.
func (c *Config) methodAllowed(method []byte, value string) bool {
	for i := range c.AllowedByMethods {
		a := &c.AllowedByMethods[i]
		if a.user != value {
			continue
		}
		for _, m := range a.methods {
			if string(method) == m {
				return true
			}
		}
		return false
	}
	return true
}
