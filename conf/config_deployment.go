package conf

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Deployment is config.yaml's deployment section: what part a node plays in a fleet and
// where its Admin API objects live, as APISIX's deployment section.
type Deployment struct {
	// Role is RoleTraditional, RoleDataPlane or RoleControlPlane.
	Role string `json:"role"`
	// ConfigProvider is ProviderLocal, ProviderEtcd, ProviderYAML or ProviderJSON.
	ConfigProvider string `json:"config_provider"`
	Etcd           Etcd   `json:"etcd"`
}

// The deployment roles, as APISIX names them.
const (
	// RoleTraditional serves both the Admin API and the data plane.
	RoleTraditional = "traditional"
	// RoleDataPlane serves the data plane only; it opens no Admin API and takes its config
	// from etcd or a standalone file.
	RoleDataPlane = "data_plane"
	// RoleControlPlane serves the Admin API only: no data listeners, no workers.
	RoleControlPlane = "control_plane"
)

// The config providers.
const (
	ProviderLocal = "local" // the data_dir store of one node
	ProviderEtcd  = "etcd"  // APISIX 3's key layout under deployment.etcd.prefix
	ProviderYAML  = "yaml"  // APISIX's standalone file, conf/apisix.yaml (read-only)
	ProviderJSON  = "json"  // the same as JSON, conf/apisix.json
)

// Standalone reports whether the objects come from a standalone file (yaml or json): the
// Admin API, where a node serves one, only reads.
func (d *Deployment) Standalone() bool {
	return d.ConfigProvider == ProviderYAML || d.ConfigProvider == ProviderJSON
}

// StandaloneFile is the standalone file's path under the prefix's conf directory.
func (d *Deployment) StandaloneFile() string {
	if d.ConfigProvider == ProviderJSON {
		return "apisix.json"
	}
	return "apisix.yaml"
}

// Etcd is deployment.etcd: how a node reaches the etcd cluster that holds its config.
type Etcd struct {
	// Host lists the cluster's endpoints as URLs: http://host:port or https://host:port.
	Host []string `json:"host"`
	// Prefix is the key prefix every object lives under ("/apisix"): <prefix>/routes/<id>.
	Prefix string `json:"prefix"`
	// Timeout bounds a read (the initial list, a re-list) and each connection attempt.
	Timeout time.Duration `json:"timeout"`
	// WriteTimeout bounds an Admin API write, so a write with etcd down answers 503
	// instead of hanging.
	WriteTimeout time.Duration `json:"write_timeout"`
	// ClusterWaitTimeout bounds how long an Admin API write, once this node serves it,
	// waits for every other live node to serve it too before it answers 503 naming them.
	ClusterWaitTimeout time.Duration `json:"cluster_wait_timeout"`
	User               string        `json:"user"`
	Password           string        `json:"password"`
	TLS                EtcdTLS       `json:"tls"`
}

// EtcdTLS is deployment.etcd.tls: the client certificate gw shows etcd and how it checks
// etcd's. Relative paths are under the prefix.
type EtcdTLS struct {
	Cert   string `json:"cert"`
	Key    string `json:"key"`
	CA     string `json:"ca"`
	Verify bool   `json:"verify"`
}

// ServesAdmin reports whether the node opens an Admin API (every role but data_plane).
func (d *Deployment) ServesAdmin() bool { return d.Role != RoleDataPlane }

// ServesData reports whether the node runs workers on node_listen (every role but
// control_plane).
func (d *Deployment) ServesData() bool { return d.Role != RoleControlPlane }

func (l *loader) deployment(path string, n *yaml.Node, d *Deployment) {
	l.mapping(n, path, []yamlField{
		{"role", yamlInto(&d.Role, l.oneOfThese(RoleTraditional, RoleDataPlane, RoleControlPlane))},
		{"config_provider", yamlInto(&d.ConfigProvider, l.oneOfThese(ProviderLocal, ProviderEtcd, ProviderYAML, ProviderJSON))},
		{"etcd", func(p string, v *yaml.Node) { l.etcd(p, v, &d.Etcd) }},
	})
}

func (l *loader) etcd(path string, n *yaml.Node, e *Etcd) {
	l.mapping(n, path, []yamlField{
		{"host", yamlInto(&e.Host, l.etcdHosts)},
		{"prefix", yamlInto(&e.Prefix, l.etcdPrefix)},
		{"timeout", yamlInto(&e.Timeout, l.positiveDuration)},
		{"write_timeout", yamlInto(&e.WriteTimeout, l.positiveDuration)},
		{"cluster_wait_timeout", yamlInto(&e.ClusterWaitTimeout, l.positiveDuration)},
		{"user", yamlInto(&e.User, l.scalarString)},
		{"password", yamlInto(&e.Password, l.scalarString)},
		{"tls", func(p string, v *yaml.Node) {
			l.mapping(v, p, []yamlField{
				{"cert", yamlInto(&e.TLS.Cert, l.scalarString)},
				{"key", yamlInto(&e.TLS.Key, l.scalarString)},
				{"ca", yamlInto(&e.TLS.CA, l.scalarString)},
				{"verify", yamlInto(&e.TLS.Verify, l.boolean)},
			})
		}},
	})
}

// etcdHosts accepts a list of http:// or https:// URLs with a host and a port and
// nothing else, as etcd's client takes them.
func (l *loader) etcdHosts(path string, v *yaml.Node) ([]string, bool) {
	items, ok := l.list(path, v)
	if !ok {
		return nil, false
	}
	if len(items) == 0 {
		l.errorf(v.Line, path, "needs at least one etcd endpoint, e.g. http://127.0.0.1:2379")
		return nil, false
	}
	hosts := make([]string, 0, len(items))
	valid := true
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		s, ok := l.scalarString(p, item)
		if !ok {
			valid = false
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Port() == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			l.errorf(item.Line, p, "must be an endpoint URL such as http://127.0.0.1:2379 (http or https, a host and a port, no path), got %s", describeYAML(item))
			valid = false
			continue
		}
		hosts = append(hosts, u.Scheme+"://"+u.Host)
	}
	return hosts, valid
}

// etcdPrefix accepts "/name" or "/a/b": keys are <prefix>/<kind>/<id>, so the prefix
// starts with one slash and does not end with one.
func (l *loader) etcdPrefix(path string, v *yaml.Node) (string, bool) {
	s, ok := l.scalarString(path, v)
	if !ok {
		return "", false
	}
	if !strings.HasPrefix(s, "/") || len(s) < 2 || strings.HasSuffix(s, "/") || strings.Contains(s, "//") {
		l.errorf(v.Line, path, `must start with "/" and not end with one, such as "/apisix", got %s`, describeYAML(v))
		return "", false
	}
	return s, true
}

// crossCheckDeployment applies the rules between deployment's keys: a data_plane or
// control_plane node shares its config with others, which the local store cannot do.
func (l *loader) crossCheckDeployment(c *Config) {
	d := &c.Deployment
	if d.Role == RoleDataPlane && d.ConfigProvider == ProviderLocal {
		p := l.pick("deployment.config_provider", "deployment.role")
		l.errorf(l.lines[p], p, "role data_plane needs config_provider etcd, yaml or json (deployment.role and deployment.config_provider): "+
			"it has no Admin API, so the local store would stay empty")
	}
	if d.Role == RoleControlPlane && d.ConfigProvider != ProviderEtcd {
		p := l.pick("deployment.config_provider", "deployment.role")
		l.errorf(l.lines[p], p, "role control_plane needs config_provider etcd (deployment.role and deployment.config_provider): "+
			"a control_plane shares its config with other nodes through etcd, got %s", d.ConfigProvider)
	}
	if d.Etcd.Password != "" && d.Etcd.User == "" {
		p := "deployment.etcd.password"
		l.errorf(l.lines[p], p, "is set without deployment.etcd.user; set both or neither")
	}
	if (d.Etcd.TLS.Cert == "") != (d.Etcd.TLS.Key == "") {
		p := l.pick("deployment.etcd.tls.cert", "deployment.etcd.tls.key")
		l.errorf(l.lines[p], p, "deployment.etcd.tls.cert and deployment.etcd.tls.key go together; set both or neither")
	}
}
