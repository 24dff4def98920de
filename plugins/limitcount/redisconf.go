package limitcount

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

// RedisConfig is where the redis and redis-cluster policies keep their counters, with
// APISIX's defaults (apisix/utils/redis-schema.lua) applied. It is part of Config and as
// immutable.
type RedisConfig struct {
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
	// next request dials again (redisClient.closeWhenIdle). KeepalivePool is the pool's
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

// lookupEnv is os.LookupEnv; tests replace it.
var lookupEnv = os.LookupEnv

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
func (r *RedisConfig) resolveRefs() error {
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
		v, ok := ref.Resolve(lookupEnv)
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
func (r *RedisConfig) TimeoutDuration() time.Duration {
	return time.Duration(r.Timeout) * time.Millisecond
}

// minSyncInterval is APISIX's: "sync_interval should not be smaller than 0.1".
const minSyncInterval = 0.1

// parseRedisMember reads one of the redis policies' members into c; handled is false for
// a name that is none of them. The redis-sentinel policy's own settings are accepted
// without a look: the policy itself is refused.
func (c *Config) parseRedisMember(m pluginconf.Member) (handled bool, err error) {
	r := &c.RedisConfig
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
	case "sync_interval":
		c.SyncInterval, err = syncInterval(m)
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

// syncInterval reads sync_interval in seconds; APISIX's default, -1, turns it off (0).
// Its bounds depend on the policy and time_window, checked once all are read.
func syncInterval(m pluginconf.Member) (float64, error) {
	s := string(m.Value)
	f, err := strconv.ParseFloat(s, 64)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) || err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("sync_interval: must be a number of seconds, got %s", m.Show())
	}
	if f == -1 {
		return 0, nil
	}
	if f == 0 {
		// 0 is kept apart from "off" so that the policy check refuses it, as APISIX does.
		return math.SmallestNonzeroFloat64, nil
	}
	return f, nil
}

// finishRedis applies the redis policies' defaults and requirements once every member is
// read. With policy local the redis settings are checked but not kept, as APISIX ignores
// them: they neither change the counters' keys nor the group rule.
func (c *Config) finishRedis() error {
	r := &c.RedisConfig
	switch c.Policy {
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
		c.RedisConfig, c.SyncInterval = RedisConfig{}, 0
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
	if err := r.resolveRefs(); err != nil {
		return err
	}
	if c.SyncInterval != 0 {
		if c.SyncInterval < minSyncInterval {
			return fmt.Errorf("sync_interval: should not be smaller than %g, got %s", minSyncInterval, showSeconds(c.SyncInterval))
		}
		if c.SyncInterval >= float64(c.TimeWindow) {
			return fmt.Errorf("sync_interval: should be smaller than time_window, got %s with time_window %d",
				showSeconds(c.SyncInterval), c.TimeWindow)
		}
	}
	return nil
}

func showSeconds(f float64) string {
	if f == math.SmallestNonzeroFloat64 {
		return "0"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// SyncDuration is SyncInterval as a duration; 0 when counts go to Redis on every
// request.
func (c *Config) SyncDuration() time.Duration {
	return time.Duration(c.SyncInterval * float64(time.Second))
}

// redisSettings are the redis settings, for canonical and difference: none with policy
// local, so that local counters keep their keys.
func (c *Config) redisSettings() []setting {
	if c.Policy == "local" {
		return nil
	}
	r := &c.RedisConfig
	nodes := make([]string, len(r.ClusterNodes))
	for i, n := range r.ClusterNodes {
		nodes[i] = strconv.Quote(n)
	}
	return []setting{
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
		{"sync_interval", strconv.FormatFloat(c.SyncInterval, 'g', -1, 64)},
	}
}
