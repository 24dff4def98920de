package conf

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func wantDefaultDeployment() Deployment {
	return Deployment{
		Role: RoleTraditional, ConfigProvider: ProviderLocal,
		Etcd: Etcd{
			Host: []string{"http://127.0.0.1:2379"}, Prefix: "/apisix",
			Timeout: 30 * time.Second, WriteTimeout: 5 * time.Second, ClusterWaitTimeout: 5 * time.Second,
			TLS: EtcdTLS{Verify: true},
		},
	}
}

func TestDeploymentStandalone(t *testing.T) {
	for _, tc := range []struct {
		provider, file string
		standalone     bool
	}{{ProviderYAML, "apisix.yaml", true}, {ProviderJSON, "apisix.json", true}, {ProviderEtcd, "apisix.yaml", false}, {ProviderLocal, "apisix.yaml", false}} {
		d := Deployment{ConfigProvider: tc.provider}
		if d.Standalone() != tc.standalone || (tc.standalone && d.StandaloneFile() != tc.file) {
			t.Errorf("%s: Standalone %v, file %s", tc.provider, d.Standalone(), d.StandaloneFile())
		}
	}
}

func TestDeploymentAccepts(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(d *Deployment)
	}{
		{"etcd", "deployment: {config_provider: etcd, etcd: {host: ['http://10.0.0.1:2379', 'https://etcd.example:2379/'], prefix: /gw/prod, timeout: 3, write_timeout: 500ms, cluster_wait_timeout: 2s}}",
			func(d *Deployment) {
				d.ConfigProvider = ProviderEtcd
				d.Etcd.Host = []string{"http://10.0.0.1:2379", "https://etcd.example:2379"}
				d.Etcd.Prefix, d.Etcd.Timeout, d.Etcd.WriteTimeout = "/gw/prod", 3*time.Second, 500*time.Millisecond
				d.Etcd.ClusterWaitTimeout = 2 * time.Second
			}},
		{"data plane", "deployment: {role: data_plane, config_provider: etcd}", func(d *Deployment) {
			d.Role, d.ConfigProvider = RoleDataPlane, ProviderEtcd
		}},
		{"control plane", "deployment: {role: control_plane, config_provider: etcd}", func(d *Deployment) {
			d.Role, d.ConfigProvider = RoleControlPlane, ProviderEtcd
		}},
		{"credentials and tls", "deployment: {etcd: {user: root, password: pw, tls: {cert: c.pem, key: k.pem, ca: ca.pem, verify: false}}}", func(d *Deployment) {
			d.Etcd.User, d.Etcd.Password = "root", "pw"
			d.Etcd.TLS = EtcdTLS{Cert: "c.pem", Key: "k.pem", CA: "ca.pem"}
		}},
		{"standalone data plane", "deployment: {role: data_plane, config_provider: yaml}", func(d *Deployment) {
			d.Role, d.ConfigProvider = RoleDataPlane, ProviderYAML
		}},
		{"standalone traditional json", "deployment: {config_provider: json}", func(d *Deployment) {
			d.ConfigProvider = ProviderJSON
		}},
		// admin.* is ignored on a data_plane node: the public key on 0.0.0.0 is no error.
		{"data plane ignores admin", "deployment: {role: data_plane, config_provider: etcd}\nadmin: {listen: 0.0.0.0:9180}", func(d *Deployment) {
			d.Role, d.ConfigProvider = RoleDataPlane, ProviderEtcd
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "config.yaml")
			if err != nil {
				t.Fatal(err)
			}
			want := wantDefaultDeployment()
			tt.want(&want)
			if !reflect.DeepEqual(c.Deployment, want) {
				t.Fatalf("got %+v\nwant %+v", c.Deployment, want)
			}
		})
	}
}

func TestDeploymentRejects(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown role", "deployment: {role: edge}", "config.yaml:1: deployment.role: must be one of traditional, data_plane, control_plane"},
		{"unknown provider", "deployment: {config_provider: consul}", "deployment.config_provider: must be one of local, etcd, yaml, json"},
		{"data plane on local", "deployment: {role: data_plane}", "deployment.role: role data_plane needs config_provider etcd, yaml or json (deployment.role and deployment.config_provider)"},
		{"control plane on yaml", "deployment: {role: control_plane, config_provider: yaml}", "role control_plane needs config_provider etcd"},
		{"control plane on local", "deployment:\n  role: control_plane\n  config_provider: local", "config.yaml:3: deployment.config_provider: role control_plane needs config_provider etcd"},
		{"empty hosts", "deployment: {etcd: {host: []}}", "deployment.etcd.host: needs at least one etcd endpoint"},
		{"host without scheme", "deployment: {etcd: {host: ['127.0.0.1:2379']}}", `deployment.etcd.host[0]: must be an endpoint URL such as http://127.0.0.1:2379 (http or https, a host and a port, no path), got "127.0.0.1:2379"`},
		{"host without port", "deployment: {etcd: {host: ['http://etcd']}}", "deployment.etcd.host[0]: must be an endpoint URL"},
		{"host with path", "deployment: {etcd: {host: ['http://etcd:2379/v3']}}", "deployment.etcd.host[0]: must be an endpoint URL"},
		{"prefix without slash", "deployment: {etcd: {prefix: apisix}}", `deployment.etcd.prefix: must start with "/" and not end with one, such as "/apisix", got "apisix"`},
		{"prefix with trailing slash", "deployment: {etcd: {prefix: /apisix/}}", "deployment.etcd.prefix: must start with"},
		{"zero timeout", "deployment: {etcd: {write_timeout: 0}}", "deployment.etcd.write_timeout: must be more than zero"},
		{"zero cluster wait", "deployment: {etcd: {cluster_wait_timeout: 0s}}", "deployment.etcd.cluster_wait_timeout: must be more than zero"},
		{"password alone", "deployment: {etcd: {password: pw}}", "deployment.etcd.password: is set without deployment.etcd.user"},
		{"cert alone", "deployment: {etcd: {tls: {cert: c.pem}}}", "deployment.etcd.tls.cert: deployment.etcd.tls.cert and deployment.etcd.tls.key go together"},
		{"unknown key", "deployment: {etcd: {watch_timeout: 50}}", "deployment.etcd.watch_timeout: unknown key"},
		// A traditional node still checks its Admin API.
		{"traditional checks admin", "deployment: {config_provider: etcd}\nadmin: {listen: 0.0.0.0:9180}", "admin.listen: \"0.0.0.0:9180\" is not a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "config.yaml")
			if err == nil {
				t.Fatalf("accepted %q", tt.yaml)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tt.want)
			}
		})
	}
}
