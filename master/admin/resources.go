package admin

import (
	"encoding/json"

	"gw/conf"
	"gw/master/store"
	"gw/plugins"
)

// resource is one Admin API collection. Adding a kind (consumers, ssls, ...) is one more
// entry in resources plus its kind in master/store.
type resource struct {
	kind store.Kind
	// singular is APISIX's word in messages: "missing route id".
	singular string
	// validate checks a whole object as it would be stored, JSON included.
	validate func(value []byte) error
	// refs are the fields that name another object, which must exist.
	refs []reference
	// inUse starts the message refusing to delete an object still referenced; APISIX
	// words it differently per kind.
	inUse string
}

type reference struct {
	field string
	kind  store.Kind
}

var resources = map[string]*resource{
	"routes": {
		kind:     store.Routes,
		singular: "route",
		validate: func(value []byte) error {
			r, err := conf.DecodeRoute(value)
			if err != nil {
				return err
			}
			return plugins.ValidateAll(r.Plugins)
		},
		refs: []reference{{"upstream_id", store.Upstreams}, {"service_id", store.Services}},
	},
	"upstreams": {
		kind:     store.Upstreams,
		singular: "upstream",
		validate: func(value []byte) error {
			_, err := conf.DecodeUpstream(value)
			return err
		},
		inUse: "can not delete this upstream",
	},
	"services": {
		kind:     store.Services,
		singular: "service",
		validate: func(value []byte) error {
			s, err := conf.DecodeService(value)
			if err != nil {
				return err
			}
			return plugins.ValidateAll(s.Plugins)
		},
		refs:  []reference{{"upstream_id", store.Upstreams}},
		inUse: "can not delete this service directly",
	},
}

// referrerOrder is the order in which referrers are searched before a delete, as in
// APISIX (routes before services), so the message names the same object.
var referrerOrder = []string{"routes", "services"}

func resourceOf(kind store.Kind) *resource {
	for _, res := range resources {
		if res.kind == kind {
			return res
		}
	}
	panic("BUG: admin: no resource for kind " + string(kind))
}

// idString gives an id-valued field in its string form: APISIX accepts a string or an
// integer. Other types give "" (the validator rejects them).
func idString(v any) string {
	switch id := v.(type) {
	case string:
		return id
	case json.Number:
		return id.String()
	}
	return ""
}
