package redispolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"gw/conf"
	"gw/plugins/pluginconf"
)

// Config is where a traffic-control plugin's redis or redis-cluster policy keeps its
// counters, with APISIX's defaults (apisix/utils/redis-schema.lua) applied. It is part of
// the plugin's configuration and as immutable.
type Config struct {
	// Host and Port are the redis policy's server.
	Host string `json:"redis_host,omitempty"`
	Port int    `json:"redis_port,omitempty"`
	// Username and Password authenticate (AUTH); an empty Password sends no AUTH, as
	// APISIX. redis-cluster uses them too.
	Username string `json:"redis_username,omitempty"`
	Password string `json:"redis_password,omitempty"`
	// Database is SELECTed on each new connection (redis policy only).
	Database int64 `json:"redis_database,omitempty"`
	// Timeout bounds, in milliseconds, connecting and each command: no request waits
	// longer for Redis.
	Timeout int64 `json:"redis_timeout,omitempty"`
	// SSL and SSLVerify: TLS to the server, and whether its certificate is checked.
	SSL       bool `json:"redis_ssl,omitempty"`
	SSLVerify bool `json:"redis_ssl_verify,omitempty"`
	// KeepaliveTimeout is APISIX's pool idle timeout, in milliseconds: a worker's
	// connection to the server closes once no request has used it that long, and the
	// next request dials again (Client.closeWhenIdle). KeepalivePool is the pool's
	// size: gw keeps one multiplexed connection per server and worker, never more than
	// any pool size allows, so it is checked and kept, and never binds.
	KeepaliveTimeout int64 `json:"redis_keepalive_timeout,omitempty"`
	KeepalivePool    int64 `json:"redis_keepalive_pool,omitempty"`
	// ClusterNodes ("host:port") are the redis-cluster policy's seeds; ClusterName
	// names the cluster, as APISIX requires (gw also refuses an empty one), and is only
	// part of the client's identity.
	ClusterNodes     []string `json:"redis_cluster_nodes,omitempty"`
	ClusterName      string   `json:"redis_cluster_name,omitempty"`
	ClusterSSL       bool     `json:"redis_cluster_ssl,omitempty"`
	ClusterSSLVerify bool     `json:"redis_cluster_ssl_verify,omitempty"`

	// host, username and password are Host, Username and Password with a secret
	// reference ($env://NAME, as APISIX's fetch_secrets) replaced by its value from the
	// process's environment. The fields above keep what was written, so a route's
	// counter key and the group rule do not depend on the environment.
	host, username, password string
}

// Written is r as written, without the values its secret references resolved to.
func (r Config) Written() Config {
	r.host, r.username, r.password = "", "", ""
	return r
}

// LookupEnv is os.LookupEnv; tests replace it.
var LookupEnv = os.LookupEnv

// secretRefMember reads redis_host, redis_username or redis_password: a plain string,
// or an $env:// reference that gw can resolve (a malformed one, or $secret://, is
// refused). Its value is looked up once the policy is known (resolveRefs).
func secretRefMember(m pluginconf.Member, read func() (string, error)) (string, error) {
	s, err := read()
	if err != nil {
		return "", err
	}
	if _, isRef, err := conf.ParseSecretRef(s); isRef && err != nil {
		return "", fmt.Errorf("%s: %v", m.Name, err)
	}
	return s, nil
}

// resolveRefs looks up the secret references among the connection's settings in the
// environment: the master's when the Admin API checks a write, the worker's (the same,
// inherited) when it builds the route. A reference without a value fails the
// configuration, naming the field: a write is refused with a 400, and a stored route
// whose variable has gone is left out and reported rather than served with a wrong
// server or password.
func (r *Config) resolveRefs() error {
	for _, f := range []struct {
		name    string
		written string
		value   *string
	}{{"redis_host", r.Host, &r.host}, {"redis_username", r.Username, &r.username}, {"redis_password", r.Password, &r.password}} {
		*f.value = f.written
		ref, isRef, err := conf.ParseSecretRef(f.written)
		if !isRef {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %v", f.name, err)
		}
		v, ok := ref.Resolve(LookupEnv)
		if !ok {
			return fmt.Errorf("%s: %s has no value in the gateway's environment (unset, empty, or without that member)", f.name, ref)
		}
		*f.value = v
	}
	if r.Host != "" && len(r.host) < 2 {
		return fmt.Errorf("redis_host: must be at least 2 characters, got %q from %s", r.host, r.Host)
	}
	return nil
}

// TimeoutDuration is Timeout as a duration.
func (r *Config) TimeoutDuration() time.Duration {
	return time.Duration(r.Timeout) * time.Millisecond
}

// ParseMember reads one of the redis policies' members into r; handled is false for a
// name that is none of them. The redis-sentinel policy's own settings are accepted
// without a look: the policy itself is refused.
func (r *Config) ParseMember(m pluginconf.Member) (handled bool, err error) {
	switch m.Name {
	case "redis_host":
		r.Host, err = secretRefMember(m, m.AnyString)
		if err == nil && len(r.Host) < 2 {
			err = fmt.Errorf("redis_host: must be at least 2 characters, got %s", m.Show())
		}
	case "redis_port":
		var port int64
		port, err = m.IntIn(1, 65535)
		r.Port = int(port)
	case "redis_username":
		r.Username, err = secretRefMember(m, m.NonEmptyString)
	case "redis_password":
		r.Password, err = secretRefMember(m, m.AnyString)
	case "redis_database":
		r.Database, err = m.IntIn(0, math.MaxInt32)
	case "redis_timeout":
		r.Timeout, err = m.PositiveInt(math.MaxInt32)
	case "redis_ssl":
		r.SSL, err = m.Bool()
	case "redis_ssl_verify":
		r.SSLVerify, err = m.Bool()
	case "redis_keepalive_timeout":
		r.KeepaliveTimeout, err = m.IntIn(1000, math.MaxInt32)
	case "redis_keepalive_pool":
		r.KeepalivePool, err = m.PositiveInt(math.MaxInt32)
	case "redis_cluster_nodes":
		r.ClusterNodes, err = clusterNodes(m)
	case "redis_cluster_name":
		r.ClusterName, err = m.NonEmptyString()
	case "redis_cluster_ssl":
		r.ClusterSSL, err = m.Bool()
	case "redis_cluster_ssl_verify":
		r.ClusterSSLVerify, err = m.Bool()
	case "redis_sentinels", "redis_master_name", "redis_role", "redis_connect_timeout", "redis_read_timeout",
		"sentinel_username", "sentinel_password":
	default:
		return false, nil
	}
	return true, err
}

// clusterNodes reads redis_cluster_nodes: at least one "host:port", as APISIX's
// resty-redis-cluster splits them (APISIX checks only that each is 2 to 100 characters).
func clusterNodes(m pluginconf.Member) ([]string, error) {
	var nodes []string
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &nodes) != nil || len(nodes) == 0 {
		return nil, fmt.Errorf("redis_cluster_nodes: must be a non-empty array of \"host:port\" strings, got %s", m.Show())
	}
	for i, n := range nodes {
		host, port, err := net.SplitHostPort(n)
		p, perr := strconv.Atoi(port)
		if len(n) < 2 || len(n) > 100 || err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("redis_cluster_nodes[%d]: must be \"host:port\" with a port from 1 to 65535, got %q", i, n)
		}
	}
	return nodes, nil
}

// Finish applies the redis policies' defaults and requirements once every member is
// read, and resolves the secret references. With any other policy (local) the settings
// are checked but not kept, as APISIX ignores them: r becomes zero.
func (r *Config) Finish(policy string) error {
	switch policy {
	case "redis":
		if r.Host == "" {
			return errors.New(`redis_host: is required with policy "redis"`)
		}
		if r.Port == 0 {
			r.Port = 6379
		}
	case "redis-cluster":
		if len(r.ClusterNodes) == 0 {
			return errors.New(`redis_cluster_nodes: is required with policy "redis-cluster" (the cluster's "host:port" seeds)`)
		}
		if r.ClusterName == "" {
			return errors.New(`redis_cluster_name: is required with policy "redis-cluster"`)
		}
	default:
		*r = Config{}
		return nil
	}
	if r.Timeout == 0 {
		r.Timeout = 1000
	}
	if r.KeepaliveTimeout == 0 {
		r.KeepaliveTimeout = 10000
	}
	if r.KeepalivePool == 0 {
		r.KeepalivePool = 100
	}
	return r.resolveRefs()
}

// Setting is one field of a configuration in a plugin's canonical text.
type Setting struct{ Name, Value string }

// Settings are the redis settings as written, for a plugin's canonical text (its
// counters' keys, its group rule): none with policy local, so that local counters keep
// their keys.
func (r *Config) Settings(policy string) []Setting {
	if policy != "redis" && policy != "redis-cluster" {
		return nil
	}
	nodes := make([]string, len(r.ClusterNodes))
	for i, n := range r.ClusterNodes {
		nodes[i] = strconv.Quote(n)
	}
	return []Setting{
		{"redis_host", strconv.Quote(r.Host)},
		{"redis_port", strconv.Itoa(r.Port)},
		{"redis_username", strconv.Quote(r.Username)},
		{"redis_password", strconv.Quote(r.Password)},
		{"redis_database", strconv.FormatInt(r.Database, 10)},
		{"redis_timeout", strconv.FormatInt(r.Timeout, 10)},
		{"redis_ssl", strconv.FormatBool(r.SSL)},
		{"redis_ssl_verify", strconv.FormatBool(r.SSLVerify)},
		{"redis_keepalive_timeout", strconv.FormatInt(r.KeepaliveTimeout, 10)},
		{"redis_keepalive_pool", strconv.FormatInt(r.KeepalivePool, 10)},
		{"redis_cluster_nodes", strings.Join(nodes, ",")},
		{"redis_cluster_name", strconv.Quote(r.ClusterName)},
		{"redis_cluster_ssl", strconv.FormatBool(r.ClusterSSL)},
		{"redis_cluster_ssl_verify", strconv.FormatBool(r.ClusterSSLVerify)},
	}
}
