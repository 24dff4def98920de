package conf

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
)

// HealthChecks is an upstream's "checks", APISIX's health_checker schema (schema_def.lua).
// Decoding fills every member the client left out with APISIX's default, so what travels
// to the master's checker and to the workers is complete. Active is always set on a
// decoded value: APISIX's anyOf requires it, passive checks alone never bring a node back.
type HealthChecks struct {
	Active  *ActiveCheck  `json:"active,omitempty"`
	Passive *PassiveCheck `json:"passive,omitempty"`
}

// ActiveCheck is the probing half: the master probes every node at the interval of the
// node's current state and counts the answers.
type ActiveCheck struct {
	// Type is http, https or tcp (connect only).
	Type string `json:"type"`
	// Timeout is one probe's deadline in seconds.
	Timeout float64 `json:"timeout"`
	// Concurrency is how many nodes of this upstream are probed at once.
	Concurrency int `json:"concurrency"`
	// Host is the Host header of HTTP probes; "" sends the node's address.
	Host string `json:"host,omitempty"`
	// Port, when not 0, is probed instead of the node's own port.
	Port                   int                 `json:"port,omitempty"`
	HTTPMethod             string              `json:"http_method"`
	HTTPPath               string              `json:"http_path"`
	HTTPReqBody            string              `json:"http_req_body,omitempty"`
	HTTPSVerifyCertificate bool                `json:"https_verify_certificate"`
	ReqHeaders             []string            `json:"req_headers,omitempty"`
	Healthy                ActiveHealthyRule   `json:"healthy"`
	Unhealthy              ActiveUnhealthyRule `json:"unhealthy"`
}

// ActiveHealthyRule says when a probed node counts as healthy again.
type ActiveHealthyRule struct {
	// Interval is the seconds between probes of a healthy node.
	Interval     int   `json:"interval"`
	HTTPStatuses []int `json:"http_statuses"`
	Successes    int   `json:"successes"`
}

// ActiveUnhealthyRule says when a probed node counts as unhealthy.
type ActiveUnhealthyRule struct {
	// Interval is the seconds between probes of an unhealthy node.
	Interval     int   `json:"interval"`
	HTTPStatuses []int `json:"http_statuses"`
	HTTPFailures int   `json:"http_failures"`
	TCPFailures  int   `json:"tcp_failures"`
	Timeouts     int   `json:"timeouts"`
}

// PassiveCheck is the counting half: workers count the answers of live traffic. A
// threshold of 0 turns that kind of event off.
type PassiveCheck struct {
	Type      string               `json:"type"`
	Healthy   PassiveHealthyRule   `json:"healthy"`
	Unhealthy PassiveUnhealthyRule `json:"unhealthy"`
}

// PassiveHealthyRule says when live traffic brings a node back.
type PassiveHealthyRule struct {
	HTTPStatuses []int `json:"http_statuses"`
	Successes    int   `json:"successes"`
}

// PassiveUnhealthyRule says when live traffic takes a node out.
type PassiveUnhealthyRule struct {
	HTTPStatuses []int `json:"http_statuses"`
	HTTPFailures int   `json:"http_failures"`
	TCPFailures  int   `json:"tcp_failures"`
	Timeouts     int   `json:"timeouts"`
}

// APISIX's health_checker defaults.
var (
	defaultActiveCheck = ActiveCheck{
		Type: "http", Timeout: 1, Concurrency: 10, HTTPMethod: "GET", HTTPPath: "/",
		HTTPSVerifyCertificate: true,
		Healthy:                ActiveHealthyRule{Interval: 1, HTTPStatuses: []int{200, 302}, Successes: 2},
		Unhealthy: ActiveUnhealthyRule{Interval: 1, HTTPStatuses: []int{429, 404, 500, 501, 502, 503, 504, 505},
			HTTPFailures: 5, TCPFailures: 2, Timeouts: 3},
	}
	defaultPassiveCheck = PassiveCheck{
		Type: "http",
		Healthy: PassiveHealthyRule{HTTPStatuses: []int{200, 201, 202, 203, 204, 205, 206, 207, 208, 226,
			300, 301, 302, 303, 304, 305, 306, 307, 308}, Successes: 5},
		Unhealthy: PassiveUnhealthyRule{HTTPStatuses: []int{429, 500, 503}, HTTPFailures: 5, TCPFailures: 2, Timeouts: 7},
	}
)

// maxHealthCounter is APISIX's maximum for every threshold: the counters are 8 bits.
const maxHealthCounter = 254

var healthChecksFields = fieldDecoders[HealthChecks]{
	"active":  intoAt(func(c *HealthChecks) **ActiveCheck { return &c.Active }, decodeActiveCheck),
	"passive": intoAt(func(c *HealthChecks) **PassiveCheck { return &c.Passive }, decodePassiveCheck),
}

// decodeHealthChecks reads "checks" at path. Passive checks need active ones (APISIX's
// anyOf), since only probes bring back a node that live traffic no longer reaches.
func decodeHealthChecks(path string, raw json.RawMessage) (*HealthChecks, error) {
	var c HealthChecks
	members, err := healthChecksFields.decode(&c, path, raw)
	if err != nil {
		return nil, err
	}
	if _, ok := members["active"]; !ok {
		reason := "is required"
		if c.Passive != nil {
			reason = "is required: passive checks only take nodes out, active checks bring them back"
		}
		return nil, &ObjectError{Path: memberPath(path, "active"), Reason: reason}
	}
	return &c, nil
}

var activeCheckFields = fieldDecoders[ActiveCheck]{
	"type":                     into(func(a *ActiveCheck) *string { return &a.Type }, readCheckType),
	"timeout":                  into(func(a *ActiveCheck) *float64 { return &a.Timeout }, readSeconds),
	"concurrency":              into(func(a *ActiveCheck) *int { return &a.Concurrency }, intAtLeast(1)),
	"host":                     into(func(a *ActiveCheck) *string { return &a.Host }, readHost),
	"port":                     into(func(a *ActiveCheck) *int { return &a.Port }, readPort),
	"http_method":              into(func(a *ActiveCheck) *string { return &a.HTTPMethod }, readCheckMethod),
	"http_path":                into(func(a *ActiveCheck) *string { return &a.HTTPPath }, readCheckPath),
	"http_req_body":            into(func(a *ActiveCheck) *string { return &a.HTTPReqBody }, asString),
	"https_verify_certificate": into(func(a *ActiveCheck) *bool { return &a.HTTPSVerifyCertificate }, asBool),
	"req_headers":              into(func(a *ActiveCheck) *[]string { return &a.ReqHeaders }, readReqHeaders),
	"healthy":                  intoAt(func(a *ActiveCheck) *ActiveHealthyRule { return &a.Healthy }, decodeActiveHealthy),
	"unhealthy":                intoAt(func(a *ActiveCheck) *ActiveUnhealthyRule { return &a.Unhealthy }, decodeActiveUnhealthy),
}

func decodeActiveCheck(path string, raw json.RawMessage) (*ActiveCheck, error) {
	a := defaultActiveCheck
	a.Healthy.HTTPStatuses = slices.Clone(a.Healthy.HTTPStatuses)
	a.Unhealthy.HTTPStatuses = slices.Clone(a.Unhealthy.HTTPStatuses)
	if _, err := activeCheckFields.decode(&a, path, raw); err != nil {
		return nil, err
	}
	return &a, nil
}

var activeHealthyFields = fieldDecoders[ActiveHealthyRule]{
	"interval":      into(func(r *ActiveHealthyRule) *int { return &r.Interval }, readIntervalSeconds),
	"http_statuses": into(func(r *ActiveHealthyRule) *[]int { return &r.HTTPStatuses }, readHTTPStatuses),
	"successes":     into(func(r *ActiveHealthyRule) *int { return &r.Successes }, healthCounter(1)),
}

// decodeActiveHealthy fills what the client left out with the defaults.
func decodeActiveHealthy(path string, raw json.RawMessage) (ActiveHealthyRule, error) {
	r := defaultActiveCheck.Healthy
	r.HTTPStatuses = slices.Clone(r.HTTPStatuses)
	_, err := activeHealthyFields.decode(&r, path, raw)
	return r, err
}

var activeUnhealthyFields = fieldDecoders[ActiveUnhealthyRule]{
	"interval":      into(func(r *ActiveUnhealthyRule) *int { return &r.Interval }, readIntervalSeconds),
	"http_statuses": into(func(r *ActiveUnhealthyRule) *[]int { return &r.HTTPStatuses }, readHTTPStatuses),
	"http_failures": into(func(r *ActiveUnhealthyRule) *int { return &r.HTTPFailures }, healthCounter(1)),
	"tcp_failures":  into(func(r *ActiveUnhealthyRule) *int { return &r.TCPFailures }, healthCounter(1)),
	"timeouts":      into(func(r *ActiveUnhealthyRule) *int { return &r.Timeouts }, healthCounter(1)),
}

func decodeActiveUnhealthy(path string, raw json.RawMessage) (ActiveUnhealthyRule, error) {
	r := defaultActiveCheck.Unhealthy
	r.HTTPStatuses = slices.Clone(r.HTTPStatuses)
	_, err := activeUnhealthyFields.decode(&r, path, raw)
	return r, err
}

var passiveCheckFields = fieldDecoders[PassiveCheck]{
	"type":      into(func(p *PassiveCheck) *string { return &p.Type }, readCheckType),
	"healthy":   intoAt(func(p *PassiveCheck) *PassiveHealthyRule { return &p.Healthy }, decodePassiveHealthy),
	"unhealthy": intoAt(func(p *PassiveCheck) *PassiveUnhealthyRule { return &p.Unhealthy }, decodePassiveUnhealthy),
}

func decodePassiveCheck(path string, raw json.RawMessage) (*PassiveCheck, error) {
	p := defaultPassiveCheck
	p.Healthy.HTTPStatuses = slices.Clone(p.Healthy.HTTPStatuses)
	p.Unhealthy.HTTPStatuses = slices.Clone(p.Unhealthy.HTTPStatuses)
	if _, err := passiveCheckFields.decode(&p, path, raw); err != nil {
		return nil, err
	}
	return &p, nil
}

var passiveHealthyFields = fieldDecoders[PassiveHealthyRule]{
	"http_statuses": into(func(r *PassiveHealthyRule) *[]int { return &r.HTTPStatuses }, readHTTPStatuses),
	"successes":     into(func(r *PassiveHealthyRule) *int { return &r.Successes }, healthCounter(0)),
}

func decodePassiveHealthy(path string, raw json.RawMessage) (PassiveHealthyRule, error) {
	r := defaultPassiveCheck.Healthy
	r.HTTPStatuses = slices.Clone(r.HTTPStatuses)
	_, err := passiveHealthyFields.decode(&r, path, raw)
	return r, err
}

var passiveUnhealthyFields = fieldDecoders[PassiveUnhealthyRule]{
	"http_statuses": into(func(r *PassiveUnhealthyRule) *[]int { return &r.HTTPStatuses }, readHTTPStatuses),
	"http_failures": into(func(r *PassiveUnhealthyRule) *int { return &r.HTTPFailures }, healthCounter(0)),
	"tcp_failures":  into(func(r *PassiveUnhealthyRule) *int { return &r.TCPFailures }, healthCounter(0)),
	"timeouts":      into(func(r *PassiveUnhealthyRule) *int { return &r.Timeouts }, healthCounter(0)),
}

func decodePassiveUnhealthy(path string, raw json.RawMessage) (PassiveUnhealthyRule, error) {
	r := defaultPassiveCheck.Unhealthy
	r.HTTPStatuses = slices.Clone(r.HTTPStatuses)
	_, err := passiveUnhealthyFields.decode(&r, path, raw)
	return r, err
}

func readCheckType(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error {
		switch s {
		case "http", "https", "tcp":
			return nil
		}
		return fmt.Errorf("matches none of the enum values (http, https, tcp), got %q", s)
	})
}

func readCheckMethod(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error {
		if !slices.Contains(httpMethods, s) {
			return fmt.Errorf("matches none of the enum values (GET, POST, PUT, DELETE, PATCH, HEAD, OPTIONS, CONNECT, TRACE, PURGE), got %q", s)
		}
		return nil
	})
}

// readCheckPath wants an origin-form path: it goes into the probe's request line as is.
func readCheckPath(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error {
		if s == "" || s[0] != '/' {
			return fmt.Errorf("must start with '/', got %q", s)
		}
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] == 0x7f {
				return fmt.Errorf("must not contain spaces or control characters, got %q", s)
			}
		}
		return nil
	})
}

// readReqHeaders reads "Name: value" lines, as APISIX passes them to the probe.
func readReqHeaders(raw json.RawMessage) ([]string, error) {
	return stringList(raw, 1, func(s string) error {
		name, value, ok := cutHeaderLine(s)
		if !ok || !isHashHeaderName(name) {
			return fmt.Errorf(`must be "Name: value" with a name of letters, digits, '-' and '_', got %q`, s)
		}
		for i := 0; i < len(value); i++ {
			if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
				return fmt.Errorf("header value must not contain control characters, got %q", s)
			}
		}
		return nil
	})
}

// cutHeaderLine splits "Name: value" into the name and the value without surrounding space.
func cutHeaderLine(s string) (name, value string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			value = s[i+1:]
			for len(value) > 0 && (value[0] == ' ' || value[0] == '\t') {
				value = value[1:]
			}
			for len(value) > 0 && (value[len(value)-1] == ' ' || value[len(value)-1] == '\t') {
				value = value[:len(value)-1]
			}
			return s[:i], value, i > 0
		}
	}
	return "", "", false
}

// CutHeaderLine splits one of req_headers' "Name: value" lines; ok is false for a line
// without a name, which decoding never lets through.
func CutHeaderLine(line string) (name, value string, ok bool) { return cutHeaderLine(line) }

// readHTTPStatuses reads a non-empty array of unique status codes 200-599.
func readHTTPStatuses(raw json.RawMessage) ([]int, error) {
	if jsonKind(raw) != "array" {
		return nil, wrongType("array", raw)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("must have at least 1 item(s), got 0")
	}
	statuses := make([]int, len(items))
	for i, item := range items {
		code, err := asInt(item)
		if err == nil && (code < 200 || code > 599) {
			err = fmt.Errorf("must be 200-599, got %d", code)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to validate item %d: %w", i+1, err)
		}
		if j := slices.Index(statuses[:i], code); j >= 0 {
			return nil, fmt.Errorf("expected unique items but items %d and %d are equal", j+1, i+1)
		}
		statuses[i] = code
	}
	return statuses, nil
}

// healthCounter reads a threshold from least to 254.
func healthCounter(least int) func(json.RawMessage) (int, error) {
	return func(raw json.RawMessage) (int, error) {
		n, err := asInt(raw)
		if err == nil && (n < least || n > maxHealthCounter) {
			err = fmt.Errorf("must be %d-%d, got %d", least, maxHealthCounter, n)
		}
		return n, err
	}
}

// The names health state is kept under: an upstream of its own is /apisix/upstreams/<id>,
// an inline one takes its route's or service's key, as APISIX names its checkers (and the
// "name" label of apisix_upstream_status).
const (
	HealthUpstreamPrefix = "/apisix/upstreams/"
	HealthRoutePrefix    = "/apisix/routes/"
	HealthServicePrefix  = "/apisix/services/"
)

// CheckedUpstream is one upstream the health checker watches, under the name its state
// and gauge are kept.
type CheckedUpstream struct {
	Name     string
	Upstream *Upstream
}

// HealthChecked reports whether u's nodes are health checked: it has checks and more than
// one node. Like APISIX, an upstream with one node is not checked, since that node is
// used whatever its health.
func (u *Upstream) HealthChecked() bool {
	return u != nil && u.Checks != nil && u.Checks.Active != nil && len(u.Nodes) > 1
}

// CheckedUpstreams lists the upstreams of snap whose nodes are health checked, stored
// ones first, then those inline in services and routes, each group in snapshot order.
func (snap *Snapshot) CheckedUpstreams() []CheckedUpstream {
	var out []CheckedUpstream
	for i := range snap.Upstreams {
		if u := &snap.Upstreams[i]; u.HealthChecked() {
			out = append(out, CheckedUpstream{HealthUpstreamPrefix + string(u.ID), u})
		}
	}
	for i := range snap.Services {
		if s := &snap.Services[i]; s.Upstream.HealthChecked() {
			out = append(out, CheckedUpstream{HealthServicePrefix + string(s.ID), s.Upstream})
		}
	}
	for i := range snap.Routes {
		if r := &snap.Routes[i]; r.Upstream.HealthChecked() {
			out = append(out, CheckedUpstream{HealthRoutePrefix + string(r.ID), r.Upstream})
		}
	}
	return out
}

// NodeAddress is node n's "host:port" (IPv6 in brackets) with the scheme's default port
// when n has none: the address the proxy connects to and health state is keyed by.
func (u *Upstream) NodeAddress(n *Node) string {
	port := n.Port
	if port == 0 {
		port = defaultPort(u.Scheme)
	}
	return net.JoinHostPort(n.Host, strconv.Itoa(port))
}
