package conf

import (
	"encoding/json"
)

// The Admin API objects (APISIX 3.x shapes). These are the decoded, validated forms that
// travel to workers inside a Snapshot; the Admin API stores and returns the client's own
// JSON, so fields here need not round-trip byte for byte.

// ID is an object id. APISIX accepts a string (1–64 chars of [a-zA-Z0-9-_.]) or a
// positive integer; both are kept as the string form.
type ID string

// Timeout is APISIX's {connect, send, read} in seconds, each MinSeconds to MaxSeconds.
type Timeout struct {
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Read    float64 `json:"read"`
}

// KeepalivePool is an upstream's connection pool per node.
type KeepalivePool struct {
	Size        int     `json:"size"`
	IdleTimeout float64 `json:"idle_timeout"`
	Requests    int     `json:"requests"`
}

// Node is one upstream server. The map form {"host:port": weight} and the array form
// [{host, port, weight, priority}] decode to the same slice.
type Node struct {
	Host     string         `json:"host"`
	Port     int            `json:"port,omitempty"`
	Weight   int            `json:"weight"` // 0 to MaxNodeWeight
	Priority int            `json:"priority,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Nodes is an upstream's node list in a stable order.
type Nodes []Node

// Upstream is APISIX's upstream object, inline in a route or service or stored on its own.
type Upstream struct {
	ID            ID                `json:"id,omitempty"`
	Name          string            `json:"name,omitempty"`
	Desc          string            `json:"desc,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Type          string            `json:"type,omitempty"`
	Nodes         Nodes             `json:"nodes,omitempty"`
	HashOn        string            `json:"hash_on,omitempty"`
	Key           string            `json:"key,omitempty"`
	Retries       *int              `json:"retries,omitempty"` // nil: APISIX's default, the number of nodes − 1
	RetryTimeout  *float64          `json:"retry_timeout,omitempty"`
	Timeout       *Timeout          `json:"timeout,omitempty"`
	KeepalivePool *KeepalivePool    `json:"keepalive_pool,omitempty"`
	Scheme        string            `json:"scheme,omitempty"`
	PassHost      string            `json:"pass_host,omitempty"`
	UpstreamHost  string            `json:"upstream_host,omitempty"`
	Checks        *HealthChecks     `json:"checks,omitempty"`
	TLS           *UpstreamTLS      `json:"tls,omitempty"`
	CreateTime    int64             `json:"create_time,omitempty"`
	UpdateTime    int64             `json:"update_time,omitempty"`
}

// MarshalJSON always writes "nodes", even empty (APISIX allows "nodes": {}), which
// omitempty would drop: an upstream without it would no longer decode.
func (u Upstream) MarshalJSON() ([]byte, error) {
	type plain Upstream
	nodes := u.Nodes
	if nodes == nil {
		nodes = Nodes{}
	}
	return json.Marshal(struct {
		plain
		Nodes Nodes `json:"nodes"`
	}{plain(u), nodes})
}

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

// presentMap tells a given but empty map (non-nil pointer) from a missing one (nil).
func presentMap(m map[string]json.RawMessage) *map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	return &m
}

// Consumer is APISIX's consumer object: a named client whose auth plugins hold its
// credentials (key-auth's key, basic-auth's username and password). Its id is its
// username. Plugin configurations are kept raw, for the plugins to read.
type Consumer struct {
	Username   string                     `json:"username"`
	Desc       string                     `json:"desc,omitempty"`
	Labels     map[string]string          `json:"labels,omitempty"`
	Plugins    map[string]json.RawMessage `json:"plugins,omitempty"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
}

// MarshalJSON keeps an empty "plugins": {}, as Route's does.
func (c Consumer) MarshalJSON() ([]byte, error) {
	type plain Consumer
	return json.Marshal(struct {
		plain
		Plugins *map[string]json.RawMessage `json:"plugins,omitempty"`
	}{plain(c), presentMap(c.Plugins)})
}

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

// GlobalRule is APISIX's global_rule object: plugins run for every request on the data
// port, whether a route matched or not.
type GlobalRule struct {
	ID         ID                         `json:"id"`
	Plugins    map[string]json.RawMessage `json:"plugins"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
}

// Snapshot is everything a worker serves from: the whole object set at one version.
// The master builds one per accepted write and sends it whole; workers never see a
// partial update.
type Snapshot struct {
	Version   uint64     `json:"version"`
	Routes    []Route    `json:"routes"`
	Upstreams []Upstream `json:"upstreams"`
	Services  []Service  `json:"services"`
	Consumers []Consumer `json:"consumers"`
	// PluginConfigs and GlobalRules are in the store's order (creation order).
	PluginConfigs []PluginConfig `json:"plugin_configs"`
	GlobalRules   []GlobalRule   `json:"global_rules"`
	// SSLs carry private keys: the snapshot travels only over the workers' socketpairs.
	SSLs []SSL `json:"ssls"`
	// LeftOut names the stored objects this snapshot does not serve, each with why: one
	// that no longer decodes (written by an older binary, edited by hand) or that failed
	// to build. They are absent from the lists above, and whatever references them sees
	// them as missing (a route whose upstream is left out answers 503).
	LeftOut []LeftOut `json:"left_out,omitempty"`
}

// LeftOut is one stored object a snapshot does not serve. Kind is the Admin API's word
// for its collection ("routes", "upstreams", ...).
type LeftOut struct {
	Kind   string `json:"kind"`
	ID     ID     `json:"id"`
	Reason string `json:"reason"`
}

// Key is "kind/id", the object's path under /apisix/admin.
func (l LeftOut) Key() string { return l.Kind + "/" + string(l.ID) }

func (l LeftOut) String() string { return l.Key() + ": " + l.Reason }

// LeaveOut removes the objects in failed from the snapshot's lists and adds them to
// LeftOut. A route, service or upstream referencing one then sees it as missing.
func (s *Snapshot) LeaveOut(failed []LeftOut) {
	if len(failed) == 0 {
		return
	}
	gone := make(map[string]bool, len(failed))
	for _, l := range failed {
		gone[l.Key()] = true
	}
	s.Routes = without(s.Routes, gone, func(r *Route) string { return "routes/" + string(r.ID) })
	s.Upstreams = without(s.Upstreams, gone, func(u *Upstream) string { return "upstreams/" + string(u.ID) })
	s.Services = without(s.Services, gone, func(v *Service) string { return "services/" + string(v.ID) })
	s.Consumers = without(s.Consumers, gone, func(c *Consumer) string { return "consumers/" + c.Username })
	s.PluginConfigs = without(s.PluginConfigs, gone, func(p *PluginConfig) string { return "plugin_configs/" + string(p.ID) })
	s.GlobalRules = without(s.GlobalRules, gone, func(g *GlobalRule) string { return "global_rules/" + string(g.ID) })
	s.SSLs = without(s.SSLs, gone, func(x *SSL) string { return "ssls/" + string(x.ID) })
	s.LeftOut = append(s.LeftOut, failed...)
}

func without[T any](list []T, gone map[string]bool, key func(*T) string) []T {
	kept := list[:0:0]
	for i := range list {
		if !gone[key(&list[i])] {
			kept = append(kept, list[i])
		}
	}
	if len(kept) == len(list) {
		return list
	}
	return kept
}

// IsLeftOut reports whether the object kind/id is in LeftOut.
func (s *Snapshot) IsLeftOut(kind string, id ID) bool {
	for i := range s.LeftOut {
		if s.LeftOut[i].Kind == kind && s.LeftOut[i].ID == id {
			return true
		}
	}
	return false
}
