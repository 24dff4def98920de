package conf

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

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
	// DiscoveryArgs is non-nil when the client sent "discovery_args": {}, kept so that a
	// GET gives it back; any member in it is refused (service discovery is not in gw).
	DiscoveryArgs *struct{} `json:"discovery_args,omitempty"`
	CreateTime    int64     `json:"create_time,omitempty"`
	UpdateTime    int64     `json:"update_time,omitempty"`
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

// KeepalivePool is an upstream's connection pool per node.
type KeepalivePool struct {
	Size        int     `json:"size"`
	IdleTimeout float64 `json:"idle_timeout"`
	Requests    int     `json:"requests"`
}

// DecodeUpstream decodes and validates one upstream. Defaults are not filled in (Normalize
// fills them for the worker), so that what the Admin API stores is what the client sent.
func DecodeUpstream(data []byte) (*Upstream, error) {
	raw, err := document(data)
	if err != nil {
		return nil, err
	}
	return decodeUpstreamAt("", raw)
}

// upstreamFields is APISIX's upstream schema (schema_def.lua upstream_schema):
// additionalProperties is false, so any other field is rejected.
var upstreamFields = fieldDecoders[Upstream]{
	"id":             into(func(u *Upstream) *ID { return &u.ID }, parseID),
	"name":           into(func(u *Upstream) *string { return &u.Name }, readName),
	"desc":           into(func(u *Upstream) *string { return &u.Desc }, readDesc),
	"labels":         intoAt(func(u *Upstream) *map[string]string { return &u.Labels }, decodeLabels),
	"type":           into(func(u *Upstream) *string { return &u.Type }, readBalancerType),
	"nodes":          intoAt(func(u *Upstream) *Nodes { return &u.Nodes }, parseNodes),
	"hash_on":        into(func(u *Upstream) *string { return &u.HashOn }, readHashOn),
	"key":            into(func(u *Upstream) *string { return &u.Key }, asString),
	"retries":        into(func(u *Upstream) **int { return &u.Retries }, optional(intAtLeast(0))),
	"retry_timeout":  into(func(u *Upstream) **float64 { return &u.RetryTimeout }, optional(readSecondsOrZero)),
	"timeout":        intoAt(func(u *Upstream) **Timeout { return &u.Timeout }, decodeTimeout),
	"keepalive_pool": intoAt(func(u *Upstream) **KeepalivePool { return &u.KeepalivePool }, decodeKeepalivePool),
	"scheme":         into(func(u *Upstream) *string { return &u.Scheme }, readScheme),
	"pass_host":      into(func(u *Upstream) *string { return &u.PassHost }, readPassHost),
	"upstream_host":  into(func(u *Upstream) *string { return &u.UpstreamHost }, readHost),
	"checks":         intoAt(func(u *Upstream) **HealthChecks { return &u.Checks }, decodeHealthChecks),
	"tls":            intoAt(func(u *Upstream) **UpstreamTLS { return &u.TLS }, decodeUpstreamTLS),
	"create_time":    into(func(u *Upstream) *int64 { return &u.CreateTime }, asInteger),
	"update_time":    into(func(u *Upstream) *int64 { return &u.UpdateTime }, asInteger),

	"discovery_args": into(func(u *Upstream) **struct{} { return &u.DiscoveryArgs }, readEmptyDiscoveryArgs),

	// APISIX has these and gw does not yet.
	"service_name":   nil,
	"discovery_type": nil,
}

// readEmptyDiscoveryArgs takes "discovery_args": {}, which asks for nothing: APISIX
// accepts it without a discovery_type, and APISIX Dashboard's upstream form sends it with
// every upstream. Any member would configure service discovery, which gw does not have.
func readEmptyDiscoveryArgs(raw json.RawMessage) (*struct{}, error) {
	members, err := asObject(raw)
	if err != nil {
		return nil, err
	}
	for name := range members {
		return nil, fmt.Errorf("discovery_args is not supported yet (service discovery); only an empty object is accepted, got member %q", name)
	}
	return &struct{}{}, nil
}

// decodeUpstreamAt decodes an upstream found at path: "" for one of its own, "upstream"
// inline in a route or service.
func decodeUpstreamAt(path string, raw json.RawMessage) (*Upstream, error) {
	var u Upstream
	if _, err := upstreamFields.decode(&u, path, raw); err != nil {
		return nil, err
	}
	if err := u.validate(path); err != nil {
		return nil, err
	}
	return &u, nil
}

// validate checks the rules that span several upstream fields. nodes is required only of
// what a client sends: an upstream built in code may leave it nil for none.
func (u *Upstream) validate(path string) error {
	if u.Nodes == nil {
		return &ObjectError{Path: memberPath(path, "nodes"), Reason: "is required (service discovery is not supported yet)"}
	}
	return u.checkAcrossFields(path)
}

func (u *Upstream) checkAcrossFields(path string) error {
	if u.PassHost == "rewrite" && u.UpstreamHost == "" {
		return &ObjectError{Path: memberPath(path, "upstream_host"), Reason: `is required when pass_host is "rewrite"`}
	}
	if err := u.validateTLS(path); err != nil {
		return err
	}
	if err := u.validateGRPCChecks(path); err != nil {
		return err
	}
	return u.validateHashKey(path)
}

// validateGRPCChecks refuses the health checks a grpc or grpcs upstream would get wrong:
// an active check of type http or https probes with HTTP/1.1, which a gRPC server does
// not answer, so every node would go unhealthy; passive checks are not counted from gRPC
// calls. An active check of type tcp (a connect) works as for any upstream.
func (u *Upstream) validateGRPCChecks(path string) error {
	if (u.Scheme != "grpc" && u.Scheme != "grpcs") || u.Checks == nil {
		return nil
	}
	if u.Checks.Passive != nil {
		return &ObjectError{Path: memberPath(path, "checks.passive"), Reason: fmt.Sprintf("passive health checks are not supported yet for scheme %q; use an active check of type tcp", u.Scheme)}
	}
	if a := u.Checks.Active; a != nil && a.Type != "tcp" {
		typ := a.Type
		if typ == "" {
			typ = "http"
		}
		return &ObjectError{Path: memberPath(path, "checks.active.type"), Reason: fmt.Sprintf(`must be "tcp" for scheme %q, got %q: an HTTP/1.1 probe cannot check a gRPC node (gRPC health checking is not supported yet)`, u.Scheme, typ)}
	}
	return nil
}

// DefaultHashOn is where a chash upstream takes its key from when hash_on is unset.
const DefaultHashOn = "vars"

// validateHashKey applies APISIX's check_upstream_conf rules for chash: key is required
// unless hash_on is consumer, and its form depends on hash_on. Like APISIX, hash_on and key
// are accepted and ignored with other balancer types.
func (u *Upstream) validateHashKey(path string) error {
	if u.Type != "chash" {
		return nil
	}
	hashOn := u.HashOn
	if hashOn == "" {
		hashOn = DefaultHashOn
	}
	if hashOn == "consumer" {
		return nil
	}
	if u.Key == "" {
		return &ObjectError{Path: memberPath(path, "key"), Reason: `missing key: required when type is "chash" and hash_on is ` + strconv.Quote(hashOn)}
	}
	var ok bool
	switch hashOn {
	case "vars":
		ok = IsHashVar(u.Key)
	case "header", "cookie":
		ok = isHashHeaderName(u.Key)
	default: // vars_combinations: text with $variables in it, every one of them known
		if _, err := ParseTemplate(u.Key, TemplateSyntax{}); err != nil {
			return &ObjectError{Path: memberPath(path, "key"), Reason: err.Error()}
		}
		return nil
	}
	if !ok {
		return &ObjectError{Path: memberPath(path, "key"), Reason: fmt.Sprintf("%s with hash_on %q: got %q", hashKeyRules[hashOn], hashOn, u.Key)}
	}
	return nil
}

var hashKeyRules = map[string]string{
	"vars": "must be one of uri, server_name, server_addr, request_uri, remote_port, remote_addr, " +
		"query_string, host, hostname, mqtt_client_id or arg_<name>",
	"header": "must be a header name of letters, digits, '-' and '_'",
	"cookie": "must be a cookie name of letters, digits, '-' and '_'",
}

// IsHashVar reports whether name is a variable chash can hash on with hash_on vars:
// APISIX's upstream_hash_vars_schema, ^((uri|server_name|...)|arg_[0-9a-zA-z_-]+)$.
// The class A-z (sic) also takes the six characters between Z and a, [\]^_ and `, as
// APISIX's pattern does.
func IsHashVar(name string) bool {
	switch name {
	case "uri", "server_name", "server_addr", "request_uri", "remote_port", "remote_addr",
		"query_string", "host", "hostname", "mqtt_client_id":
		return true
	}
	arg, ok := strings.CutPrefix(name, "arg_")
	if !ok || arg == "" {
		return false
	}
	for i := 0; i < len(arg); i++ {
		c := arg[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'z' || c == '-') {
			return false
		}
	}
	return true
}

// isHashHeaderName is APISIX's upstream_hash_header_schema, ^[a-zA-Z0-9-_]+$, for header
// and cookie names.
func isHashHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Balancer is an upstream's type, parsed: the worker switches on it at build time.
type Balancer uint8

const (
	BalanceRoundRobin Balancer = iota
	BalanceChash
	BalanceLeastConn
	BalanceEWMA
)

func balancerOf(s string) (Balancer, error) {
	switch s {
	case "roundrobin":
		return BalanceRoundRobin, nil
	case "chash":
		return BalanceChash, nil
	case "least_conn":
		return BalanceLeastConn, nil
	case "ewma":
		return BalanceEWMA, nil
	}
	return 0, fmt.Errorf(`unknown balancer type %q; the supported types are "roundrobin", "chash", "ewma" and "least_conn"`, s)
}

func readBalancerType(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error { _, err := balancerOf(s); return err })
}

// HashOn is where a chash upstream's key comes from, parsed.
type HashOn uint8

const (
	HashOnVars HashOn = iota
	HashOnHeader
	HashOnCookie
	HashOnConsumer
	HashOnVarsCombinations
)

func hashOnOf(s string) (HashOn, error) {
	switch s {
	case "vars":
		return HashOnVars, nil
	case "header":
		return HashOnHeader, nil
	case "cookie":
		return HashOnCookie, nil
	case "consumer":
		return HashOnConsumer, nil
	case "vars_combinations":
		return HashOnVarsCombinations, nil
	}
	return 0, fmt.Errorf("matches none of the enum values (vars, header, cookie, consumer, vars_combinations), got %q", s)
}

func readHashOn(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error { _, err := hashOnOf(s); return err })
}

// Scheme is an upstream's scheme, parsed.
type Scheme uint8

const (
	SchemeHTTP Scheme = iota
	SchemeHTTPS
	// SchemeGRPC is HTTP/2 in the clear (prior knowledge) to the nodes, SchemeGRPCS HTTP/2
	// over TLS: a route with either proxies gRPC calls from HTTP/2 clients.
	SchemeGRPC
	SchemeGRPCS
)

// IsGRPC reports whether s speaks HTTP/2 to the nodes, for gRPC.
func (s Scheme) IsGRPC() bool { return s == SchemeGRPC || s == SchemeGRPCS }

// Secure reports whether s speaks TLS to the nodes.
func (s Scheme) Secure() bool { return s == SchemeHTTPS || s == SchemeGRPCS }

func schemeOf(s string) (Scheme, error) {
	switch s {
	case "http":
		return SchemeHTTP, nil
	case "https":
		return SchemeHTTPS, nil
	case "grpc":
		return SchemeGRPC, nil
	case "grpcs":
		return SchemeGRPCS, nil
	case "tcp", "tls", "udp", "kafka":
		return 0, fmt.Errorf("%q is not supported yet", s)
	}
	return 0, fmt.Errorf("matches none of the enum values (grpc, grpcs, http, https, tcp, tls, udp, kafka), got %q", s)
}

func readScheme(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error { _, err := schemeOf(s); return err })
}

// PassHost is an upstream's pass_host, parsed: which Host the request carries upstream.
type PassHost uint8

const (
	PassHostPass PassHost = iota
	PassHostNode
	PassHostRewrite
)

func passHostOf(s string) (PassHost, error) {
	switch s {
	case "pass":
		return PassHostPass, nil
	case "node":
		return PassHostNode, nil
	case "rewrite":
		return PassHostRewrite, nil
	}
	return 0, fmt.Errorf("matches none of the enum values (pass, node, rewrite), got %q", s)
}

func readPassHost(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error { _, err := passHostOf(s); return err })
}

var keepalivePoolFields = fieldDecoders[KeepalivePool]{
	"size":         into(func(p *KeepalivePool) *int { return &p.Size }, intIn(1, maxKeepaliveSize)),
	"idle_timeout": into(func(p *KeepalivePool) *float64 { return &p.IdleTimeout }, readSecondsOrZero),
	"requests":     into(func(p *KeepalivePool) *int { return &p.Requests }, intAtLeast(1)),
}

// decodeKeepalivePool fills the members the client left out with APISIX's defaults here,
// not in ApplyDefaults: a zero idle_timeout is a valid setting, so afterwards "left out"
// could no longer be told apart from it.
func decodeKeepalivePool(path string, raw json.RawMessage) (*KeepalivePool, error) {
	pool := defaultKeepalivePool
	if _, err := keepalivePoolFields.decode(&pool, path, raw); err != nil {
		return nil, err
	}
	return &pool, nil
}
