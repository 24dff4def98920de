package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"gw/conf"
	"gw/master/store"
	"gw/plugins"
)

// resource is one Admin API collection. Adding a kind (ssls, ...) is one more entry in
// resources plus its kind in master/store.
type resource struct {
	kind store.Kind
	// singular is APISIX's word in messages: "missing route id".
	singular string
	// validate checks a whole object as it would be stored, JSON included.
	validate func(value []byte) error
	// validateNamed, when set, replaces validate for a kind whose id only the path holds
	// and whose checks depend on it (plugin_metadata, by plugin name); PUT then needs
	// the path's id, and says missingID without one.
	validateNamed func(id string, value []byte) error
	missingID     string
	// refs are the fields that name another object, which must exist.
	refs []reference
	// inUse starts the message refusing to delete an object still referenced; APISIX
	// words it differently per kind.
	inUse string
	// idField, when set, names the body field that is the object's id (a consumer's
	// "username"); the server then adds no "id" to the object.
	idField string
	// unsupported lists the methods APISIX refuses with 405 for this kind.
	unsupported []string
	// conflicts, when set, checks a valid object against the others stored (no two
	// consumers with one key).
	conflicts func(s *store.Store, value []byte) error
	// hidden are the fields never returned (an ssl's private keys); see shown.
	hidden []string
}

// reference is a field that names another object. field is its path, with a dot between
// levels: an upstream's client certificate is "tls.client_cert_id".
type reference struct {
	field string
	kind  store.Kind
}

// clientCertRef is tls.client_cert_id, the ssl of type client an upstream presents.
var clientCertRef = reference{"tls.client_cert_id", store.SSLs}

// inlineClientCertRef is the same in a route's or a service's inline upstream.
var inlineClientCertRef = reference{"upstream.tls.client_cert_id", store.SSLs}

var resources = map[string]*resource{
	"ssls": sslResource,
	// APISIX's admin/plugin_metadata.lua: GET, PUT and DELETE, the plugin's name the id.
	"plugin_metadata": {
		kind:          store.PluginMetadata,
		singular:      "metadata",
		missingID:     "missing plugin name",
		unsupported:   []string{"POST", "PATCH"},
		validate:      func([]byte) error { panic("BUG: admin: plugin_metadata is validated by name") },
		validateNamed: validatePluginMetadata,
	},
	"routes": {
		kind:     store.Routes,
		singular: "route",
		validate: func(value []byte) error {
			r, err := conf.DecodeRoute(value)
			if err != nil {
				return err
			}
			if err := r.Upstream.CheckClientCertificate("upstream"); err != nil {
				return err
			}
			return plugins.ValidateAll(r.Plugins)
		},
		refs: []reference{{"upstream_id", store.Upstreams}, {"service_id", store.Services},
			{"plugin_config_id", store.PluginConfigs}, inlineClientCertRef},
		conflicts: clientCertMissing,
	},
	"upstreams": {
		kind:     store.Upstreams,
		singular: "upstream",
		validate: func(value []byte) error {
			u, err := conf.DecodeUpstream(value)
			if err != nil {
				return err
			}
			return u.CheckClientCertificate("")
		},
		refs:      []reference{clientCertRef},
		inUse:     "can not delete this upstream",
		conflicts: clientCertMissing,
	},
	"services": {
		kind:     store.Services,
		singular: "service",
		validate: func(value []byte) error {
			s, err := conf.DecodeService(value)
			if err != nil {
				return err
			}
			if err := s.Upstream.CheckClientCertificate("upstream"); err != nil {
				return err
			}
			return plugins.ValidateAll(s.Plugins)
		},
		refs:      []reference{{"upstream_id", store.Upstreams}, inlineClientCertRef},
		inUse:     "can not delete this service directly",
		conflicts: clientCertMissing,
	},
	"consumers": {
		kind:        store.Consumers,
		singular:    "consumer",
		idField:     "username",
		unsupported: []string{"POST", "PATCH"},
		validate: func(value []byte) error {
			c, err := conf.DecodeConsumer(value)
			if err != nil {
				return err
			}
			return validateConsumerPlugins(c.Plugins)
		},
		conflicts: credentialTaken,
	},
	"plugin_configs": {
		kind:        store.PluginConfigs,
		singular:    "plugin config",
		unsupported: []string{"POST"},
		validate: func(value []byte) error {
			p, err := conf.DecodePluginConfig(value)
			if err != nil {
				return err
			}
			return plugins.ValidateAll(p.Plugins)
		},
		inUse: "can not delete this plugin config",
	},
	"global_rules": {
		kind:        store.GlobalRules,
		singular:    "global rule",
		unsupported: []string{"POST"},
		validate: func(value []byte) error {
			g, err := conf.DecodeGlobalRule(value)
			if err != nil {
				return err
			}
			return plugins.ValidateAll(g.Plugins)
		},
	},
}

// validatePluginMetadata checks plugin name's metadata in APISIX's words
// (admin/plugin_metadata.lua): an unknown plugin is "invalid plugin name", a plugin
// without metadata "no metadata schema for plugin <name>" (APISIX 3.0 to 3.9; later ones
// store anything for it, which gw would accept and never read), a bad member "invalid
// configuration: ..." naming it.
func validatePluginMetadata(name string, value []byte) error {
	if _, err := conf.DecodePluginMetadata(name, value); err != nil {
		return err
	}
	p, known := plugins.Lookup(name)
	if !known {
		return errors.New("invalid plugin name")
	}
	if _, owns := p.(plugins.MetadataOwner); !owns {
		return errors.New("no metadata schema for plugin " + name)
	}
	if err := plugins.ValidateMetadata(name, value); err != nil {
		return errors.New("invalid configuration: " + err.Error())
	}
	return nil
}

// validateConsumerPlugins checks a consumer's plugins in APISIX's words: the auth plugins'
// credentials with their consumer schema (plugins.ConsumerAuth), the others (merged into
// the chain of every route that names the consumer) with their route schema.
func validateConsumerPlugins(set map[string]json.RawMessage) error {
	for _, name := range slices.Sorted(maps.Keys(set)) {
		p, known := plugins.Lookup(name)
		if !known {
			return fmt.Errorf("invalid plugins configuration: unknown plugin [%s]", name)
		}
		validate := p.Validate
		if auth, ok := p.(plugins.ConsumerAuth); ok {
			validate = auth.ValidateConsumer
		}
		if err := validate(set[name]); err != nil {
			return fmt.Errorf("invalid plugins configuration: failed to check the configuration of plugin %s err: %w", name, err)
		}
	}
	return nil
}

// credentialTaken refuses a consumer whose credential for an auth plugin (key-auth's key,
// basic-auth's username: plugins.ConsumerAuth.CredentialField) another consumer already
// has (see sameCredential): a request must name exactly one consumer.
func credentialTaken(s *store.Store, value []byte) error {
	c, err := conf.DecodeConsumer(value)
	if err != nil {
		return err
	}
	for _, plugin := range slices.Sorted(maps.Keys(c.Plugins)) {
		p, _ := plugins.Lookup(plugin)
		auth, ok := p.(plugins.ConsumerAuth)
		if !ok {
			continue
		}
		field := auth.CredentialField()
		mine := credentialOf(c.Plugins[plugin], field)
		if mine == "" {
			continue
		}
		for _, obj := range s.List(store.Consumers) {
			other, err := conf.DecodeConsumer(obj.Value)
			if err != nil || other.Username == c.Username {
				continue
			}
			if sameCredential(credentialOf(other.Plugins[plugin], field), mine) {
				return fmt.Errorf("duplicate %s of plugin %s found with consumer: %s", field, plugin, other.Username)
			}
		}
	}
	return nil
}

// sameCredential reports whether two consumers' credentials would name one client: the
// same text (two references to one variable included), or the same value once secret
// references are resolved from this process's environment (the master's, which is where
// workers get values from). A reference with no value matches no request, so it clashes
// only with its own text. The environment is read at the write: a master started later
// with other values may find two equal keys, and then the older consumer keeps the key,
// as the plugins do for any duplicate.
func sameCredential(a, b string) bool {
	if a == b {
		return true
	}
	valueA, okA := credentialValue(a)
	valueB, okB := credentialValue(b)
	return okA && okB && valueA == valueB
}

// credentialValue is what workers will compare a credential with: itself, or the value
// of the secret reference it is; ok is false for a reference without a value.
func credentialValue(s string) (value string, ok bool) {
	ref, isRef, err := conf.ParseSecretRef(s)
	switch {
	case !isRef:
		return s, true
	case err != nil:
		return "", false
	}
	return ref.Resolve(os.LookupEnv)
}

// clientCertMissing refuses an upstream, or a route or service with one inline, whose
// tls.client_cert_id names no ssl of type client, as a dangling upstream_id is refused.
func clientCertMissing(s *store.Store, value []byte) error {
	var obj struct {
		TLS      *conf.UpstreamTLS `json:"tls"`
		Upstream *struct {
			TLS *conf.UpstreamTLS `json:"tls"`
		} `json:"upstream"`
	}
	if json.Unmarshal(value, &obj) != nil {
		return nil // validate has reported it
	}
	t := obj.TLS
	if obj.Upstream != nil {
		t = obj.Upstream.TLS
	}
	if t == nil || t.ClientCertID == "" {
		return nil
	}
	stored, ok := s.Get(store.SSLs, string(t.ClientCertID))
	if !ok {
		return conf.CheckClientSSL(t.ClientCertID, nil)
	}
	ssl, err := conf.DecodeStoredSSL(stored.Value)
	if err != nil {
		return err
	}
	return conf.CheckClientSSL(t.ClientCertID, ssl)
}

// credentialOf reads one string field of a plugin configuration, "" when absent.
func credentialOf(raw json.RawMessage, field string) string {
	var fields map[string]json.RawMessage
	if raw == nil || json.Unmarshal(raw, &fields) != nil {
		return ""
	}
	var value string
	if json.Unmarshal(fields[field], &value) != nil {
		return ""
	}
	return value
}

// referrerOrder is the order in which referrers are searched before a delete, as in
// APISIX (routes before services), so the message names the same object. Only ssls are
// referenced by upstreams, so where upstreams stand changes no APISIX message.
var referrerOrder = []string{"routes", "services", "upstreams"}

func resourceOf(kind store.Kind) *resource {
	for _, res := range resources {
		if res.kind == kind {
			return res
		}
	}
	panic("BUG: admin: no resource for kind " + string(kind))
}

// parseBodyID checks the "id" a client sent in a body (decoded: a string or a
// json.Number) against APISIX's id schema and gives its string form. Taking the decoded
// value's text, as idString does, would make ids of -1, 1.5 or 1e400.
func parseBodyID(v any) (string, error) {
	id, err := conf.ParseJSONID(encodeJSON(v))
	if err != nil {
		return "", &conf.ObjectError{Path: "id", Reason: err.Error()}
	}
	return string(id), nil
}

// idString gives an id-valued field that a validator has accepted (or the store holds)
// in its string form: APISIX accepts a string or an integer. Other types give "".
func idString(v any) string {
	switch id := v.(type) {
	case string:
		return id
	case json.Number:
		return id.String()
	}
	return ""
}
