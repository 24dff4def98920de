package conf

import (
	"encoding/json"
	"errors"
	"fmt"
)

// upstreamFields is APISIX's upstream schema (schema_def.lua upstream_schema):
// additionalProperties is false, so any other field is rejected.
var upstreamFields = fieldDecoders[Upstream]{
	"id":             into(func(u *Upstream) *ID { return &u.ID }, parseID),
	"name":           into(func(u *Upstream) *string { return &u.Name }, readName),
	"desc":           into(func(u *Upstream) *string { return &u.Desc }, readDesc),
	"labels":         intoAt(func(u *Upstream) *map[string]string { return &u.Labels }, decodeLabels),
	"type":           into(func(u *Upstream) *string { return &u.Type }, readBalancerType),
	"nodes":          intoAt(func(u *Upstream) *Nodes { return &u.Nodes }, parseNodes),
	"hash_on":        onlyWithChash,
	"key":            onlyWithChash,
	"retries":        into(func(u *Upstream) **int { return &u.Retries }, optional(intAtLeast(0))),
	"retry_timeout":  into(func(u *Upstream) **float64 { return &u.RetryTimeout }, optional(numberAtLeast(0))),
	"timeout":        intoAt(func(u *Upstream) **Timeout { return &u.Timeout }, decodeTimeout),
	"keepalive_pool": intoAt(func(u *Upstream) **KeepalivePool { return &u.KeepalivePool }, decodeKeepalivePool),
	"scheme":         into(func(u *Upstream) *string { return &u.Scheme }, readScheme),
	"pass_host":      into(func(u *Upstream) *string { return &u.PassHost }, readPassHost),
	"upstream_host":  into(func(u *Upstream) *string { return &u.UpstreamHost }, readHost),
	"create_time":    into(func(u *Upstream) *int64 { return &u.CreateTime }, asInteger),
	"update_time":    into(func(u *Upstream) *int64 { return &u.UpdateTime }, asInteger),

	// APISIX has these and gw does not yet.
	"checks":         nil,
	"tls":            nil,
	"service_name":   nil,
	"discovery_type": nil,
	"discovery_args": nil,
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

// validate checks the rules that span several upstream fields.
func (u *Upstream) validate(path string) error {
	switch {
	case u.Nodes == nil:
		return &ObjectError{Path: memberPath(path, "nodes"), Reason: "is required (service discovery is not supported yet)"}
	case u.PassHost == "rewrite" && u.UpstreamHost == "":
		return &ObjectError{Path: memberPath(path, "upstream_host"), Reason: `is required when pass_host is "rewrite"`}
	}
	return nil
}

// onlyWithChash rejects hash_on and key: APISIX reads them only for type chash, which gw
// does not support yet, so accepting them would silently ignore them.
func onlyWithChash(*Upstream, string, json.RawMessage) error {
	return errors.New(`is only used with type "chash", which is not supported yet`)
}

func readBalancerType(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error {
		switch s {
		case "roundrobin":
			return nil
		case "chash", "ewma", "least_conn":
			return fmt.Errorf("%q is not supported yet", s)
		}
		return fmt.Errorf(`unknown balancer type %q; the supported type is "roundrobin"`, s)
	})
}

func readScheme(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error {
		switch s {
		case "http":
			return nil
		case "https", "grpc", "grpcs", "tcp", "tls", "udp", "kafka":
			return fmt.Errorf("%q is not supported yet", s)
		}
		return fmt.Errorf("matches none of the enum values (grpc, grpcs, http, https, tcp, tls, udp, kafka), got %q", s)
	})
}

func readPassHost(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error {
		switch s {
		case "pass", "node", "rewrite":
			return nil
		}
		return fmt.Errorf("matches none of the enum values (pass, node, rewrite), got %q", s)
	})
}

var keepalivePoolFields = fieldDecoders[KeepalivePool]{
	"size":         into(func(p *KeepalivePool) *int { return &p.Size }, intAtLeast(1)),
	"idle_timeout": into(func(p *KeepalivePool) *float64 { return &p.IdleTimeout }, numberAtLeast(0)),
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
