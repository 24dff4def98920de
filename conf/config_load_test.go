package conf

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// wantDefault is the spec's defaults written out independently of config.yaml, so a change
// to the shipped file that alters a default fails here.
func wantDefault() *Config {
	return &Config{
		WorkerProcesses: 0,
		NodeListen:      []string{"0.0.0.0:9080"},
		Admin: Admin{
			Listen: "127.0.0.1:9180",
			Keys:   nil,
			Allow:  []string{"127.0.0.0/8"},
		},
		DataDir:               "data",
		WorkerShutdownTimeout: 240 * time.Second,
		ErrorLogLevel:         "warn",
		WorkerRlimitNofile:    20480,
		AccessLog: AccessLog{
			Enabled: true, Path: "logs/access.log", Format: "combined",
			Buffer: 64 << 10, FlushInterval: time.Second,
		},
		Shm: Shm{LimitCount: 10 << 20, LimitCountOnFull: "evict", Metrics: 16 << 20, HealthCheck: 1 << 20,
			LimitReq: 10 << 20, LimitConn: 10 << 20, APIBreaker: 10 << 20},
		Prometheus: Prometheus{Enabled: true, ExportAddr: "127.0.0.1:9091", ExportURI: "/apisix/prometheus/metrics", MaxSeries: 10000},
		Router:     Router{HTTP: "radixtree_host_uri"},
		Status:     Status{Enabled: false, Listen: "127.0.0.1:7085"},
		SSL:        TLSListener{Listen: []string{"0.0.0.0:9443"}},
		HTTP2: HTTP2{MaxConcurrentStreams: 128, MaxFieldSize: 4 << 10, MaxHeaderSize: 16 << 10,
			RecvTimeout: 30 * time.Second, IdleTimeout: 3 * time.Minute, H2CDisable: []string{}},
		Edge:       wantDefaultEdge(),
		Deployment: wantDefaultDeployment(),
		PluginAttr: wantDefaultPluginAttr(),
	}
}

func TestDefault(t *testing.T) {
	if got := Default(); !reflect.DeepEqual(got, wantDefault()) {
		t.Fatalf("Default() = %+v\nwant      %+v", got, wantDefault())
	}
	// Each call is a fresh copy: changing one must not change the next.
	Default().NodeListen[0] = "changed"
	if got := Default().NodeListen[0]; got != "0.0.0.0:9080" {
		t.Fatalf("Default() shares state between calls: NodeListen[0] = %q", got)
	}
}

func TestShippedFileIsTheDefault(t *testing.T) {
	got, err := Load("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, Default()) {
		t.Fatalf("Load(config.yaml) = %+v\nwant Default() %+v", got, Default())
	}
	// The file must spell out every default, not lean on zero values: parsed over an
	// empty Config it gives the same result.
	data, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	over, err := parseOver(&Config{}, data, "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(over, wantDefault()) {
		t.Fatalf("config.yaml over an empty Config = %+v\nwant %+v", over, wantDefault())
	}
	for _, phrase := range []string{"not APISIX's", "default"} {
		if !strings.Contains(string(data), phrase) {
			t.Errorf("config.yaml comments should say %q", phrase)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()

	got, err := Load(filepath.Join(dir, "absent.yaml"))
	if err != nil || !reflect.DeepEqual(got, wantDefault()) {
		t.Fatalf("missing file: got %+v, %v; want the defaults", got, err)
	}

	partial := filepath.Join(dir, "partial.yaml")
	if err := os.WriteFile(partial, []byte("worker_processes: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := wantDefault()
	want.WorkerProcesses = 2
	if got, err := Load(partial); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("partial file: got %+v, %v; want %+v", got, err, want)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("\nworker_processes: lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if err == nil || err.Error() != bad+`:2: worker_processes: must be a positive integer or "auto", got "lots"` {
		t.Fatalf("bad file: got error %v", err)
	}

	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "loading "+dir) {
		t.Fatalf("a directory: got error %v, want a loading error", err)
	}
}

// TestLoadState tells a file that sets keys from one that leaves every default alone, which
// `gwctl test` reports rather than call the defaults a tested file.
func TestLoadState(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		text string // "-" writes no file
		want FileState
	}{
		{"no file", "-", FileMissing},
		{"zero bytes", "", FileEmpty},
		{"blank lines", "\n  \n\n", FileEmpty},
		{"comments only", "# worker_processes: 2\n#node_listen:\n#  - 9080\n", FileEmpty},
		{"a lone document marker", "---\n", FileEmpty},
		{"null", "~\n", FileEmpty},
		{"an empty mapping", "{}\n", FileEmpty},
		{"one key", "worker_processes: 2\n", FileSetsKeys},
		{"a section left empty", "# everything below commented out\nadmin:\n#  listen: 9180\n", FileSetsKeys},
		{"the shipped file", string(defaultYAML), FileSetsKeys},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("%d.yaml", i))
			if tc.text != "-" {
				if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, state, err := LoadState(path)
			if err != nil {
				t.Fatal(err)
			}
			if state != tc.want {
				t.Errorf("state = %d, want %d", state, tc.want)
			}
			if tc.want != FileSetsKeys && !reflect.DeepEqual(got, wantDefault()) {
				t.Errorf("got %+v, want the defaults", got)
			}
		})
	}
	// A file that fails is an error whatever it would have set.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("worker_processes: lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadState(bad); err == nil {
		t.Error("a bad file loaded")
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(c *Config) // changes from the defaults
	}{
		{"empty file", "", func(c *Config) {}},
		{"comments only", "# nothing here\n", func(c *Config) {}},
		{"explicit null document", "~\n", func(c *Config) {}},
		{"workers integer", "worker_processes: 2", func(c *Config) { c.WorkerProcesses = 2 }},
		{"workers auto", "worker_processes: auto", func(c *Config) { c.WorkerProcesses = 0 }},
		{"workers at the cap", "worker_processes: 1024", func(c *Config) { c.WorkerProcesses = 1024 }},
		{"listen host:port", "node_listen: [10.0.0.1:80]", func(c *Config) { c.NodeListen = []string{"10.0.0.1:80"} }},
		{"listen bare port like APISIX", "node_listen: [9080]", func(c *Config) { c.NodeListen = []string{"0.0.0.0:9080"} }},
		{"listen quoted bare port", `node_listen: ["9081"]`, func(c *Config) { c.NodeListen = []string{"0.0.0.0:9081"} }},
		{"listen :port", `node_listen: [":8080"]`, func(c *Config) { c.NodeListen = []string{"0.0.0.0:8080"} }},
		{"listen ipv6 wildcard", `node_listen: ["[::]:9080"]`, func(c *Config) { c.NodeListen = []string{"[::]:9080"} }},
		{"listen ipv6 canonicalised", `node_listen: ["[0:0::1]:9080"]`, func(c *Config) { c.NodeListen = []string{"[::1]:9080"} }},
		{"listen v4-mapped unmapped", `node_listen: ["[::ffff:10.0.0.1]:80"]`, func(c *Config) { c.NodeListen = []string{"10.0.0.1:80"} }},
		{"listen localhost", `node_listen: ["localhost:80"]`, func(c *Config) { c.NodeListen = []string{"127.0.0.1:80"} }},
		{"listen port bounds", "node_listen: [1, 65535]", func(c *Config) { c.NodeListen = []string{"0.0.0.0:1", "0.0.0.0:65535"} }},
		{"listen leading zero port", `node_listen: ["127.0.0.1:080"]`, func(c *Config) { c.NodeListen = []string{"127.0.0.1:80"} }},
		{"listen several", "node_listen: [9080, 9081, '127.0.0.1:9082']", func(c *Config) {
			c.NodeListen = []string{"0.0.0.0:9080", "0.0.0.0:9081", "127.0.0.1:9082"}
		}},
		{"listen same port different hosts", "node_listen: ['127.0.0.1:80', '10.0.0.1:80']", func(c *Config) {
			c.NodeListen = []string{"127.0.0.1:80", "10.0.0.1:80"}
		}},
		{"block list style", "node_listen:\n  - 9080\n  - 9443\n", func(c *Config) { c.NodeListen = []string{"0.0.0.0:9080", "0.0.0.0:9443"} }},
		{"admin listen only merges", "admin:\n  listen: 127.0.0.1:9999\n", func(c *Config) { c.Admin.Listen = "127.0.0.1:9999" }},
		{"listen v4 and v6 wildcards side by side (ipv6only)", "node_listen: ['0.0.0.0:80', '[::]:80']", func(c *Config) {
			c.NodeListen = []string{"0.0.0.0:80", "[::]:80"}
		}},
		{"listen v4 and v6 loopback, same port", "node_listen: ['127.0.0.1:80', '[::1]:80']", func(c *Config) {
			c.NodeListen = []string{"127.0.0.1:80", "[::1]:80"}
		}},
		{"admin on v6 wildcard beside a v4 wildcard node port", "node_listen: ['0.0.0.0:9180']\nadmin:\n  listen: '[::]:9180'\n  keys: [{name: ops, key: k1}]\n", func(c *Config) {
			c.NodeListen = []string{"0.0.0.0:9180"}
			c.Admin.Listen = "[::]:9180"
			c.Admin.Keys = []AdminKey{{Name: "ops", Key: "k1", Role: "admin"}}
		}},
		{"user name", "user: root", func(c *Config) { c.User = "root" }},
		{"user name and group", "user: root root", func(c *Config) { c.User = "root root" }},
		{"user numeric ids", "user: 0 0", func(c *Config) { c.User = "0 0" }},
		{"user unquoted number", "user: 0", func(c *Config) { c.User = "0" }},
		{"user spaces collapsed", "user: '  root   root '", func(c *Config) { c.User = "root root" }},
		{"user empty means unset", `user: ""`, func(c *Config) { c.User = "" }},
		// conf reads nothing but the file: whether the user exists is confio.Check's.
		{"user unknown here", "user: no-such-user-gw nogroup-gw", func(c *Config) { c.User = "no-such-user-gw nogroup-gw" }},
		{"admin listen ipv6 loopback", `admin: {listen: "[::1]:9180"}`, func(c *Config) { c.Admin.Listen = "[::1]:9180" }},
		{"admin null keeps defaults", "admin:\n", func(c *Config) {}},
		{"admin keys default role", "admin:\n  keys:\n    - {name: ops, key: s3cret}\n", func(c *Config) {
			c.Admin.Keys = []AdminKey{{Name: "ops", Key: "s3cret", Role: "admin"}}
		}},
		{"admin keys viewer and numeric key", "admin:\n  keys:\n    - {name: ops, key: s3cret, role: admin}\n    - {name: dash, key: 12345, role: viewer}\n", func(c *Config) {
			c.Admin.Keys = []AdminKey{{Name: "ops", Key: "s3cret", Role: "admin"}, {Name: "dash", Key: "12345", Role: "viewer"}}
		}},
		{"admin keys null is none", "admin:\n  keys:\n", func(c *Config) {}},
		{"default key on loopback", "admin:\n  keys: [{name: a, key: edd1c9f034335f136f87ad84b625c8f1}]\n", func(c *Config) {
			c.Admin.Keys = []AdminKey{{Name: "a", Key: DefaultAdminKey, Role: "admin"}}
		}},
		{"public admin with own key", "admin:\n  listen: 0.0.0.0:9180\n  keys: [{name: ops, key: 3c1d0e8f6b2a4c7d}]\n", func(c *Config) {
			c.Admin.Listen = "0.0.0.0:9180"
			c.Admin.Keys = []AdminKey{{Name: "ops", Key: "3c1d0e8f6b2a4c7d", Role: "admin"}}
		}},
		{"allow cidrs and bare ips", "admin:\n  allow: [10.0.0.0/8, 192.168.1.7, '::1', 'fd00::/8']\n", func(c *Config) {
			c.Admin.Allow = []string{"10.0.0.0/8", "192.168.1.7/32", "::1/128", "fd00::/8"}
		}},
		{"allow host bits masked", "admin:\n  allow: [127.0.0.1/8]\n", func(c *Config) { c.Admin.Allow = []string{"127.0.0.0/8"} }},
		{"allow v4-mapped unmapped", "admin:\n  allow: ['::ffff:10.0.0.0/104', '::ffff:10.0.0.1']\n", func(c *Config) {
			c.Admin.Allow = []string{"10.0.0.0/8", "10.0.0.1/32"}
		}},
		{"allow everyone", "admin:\n  allow: [0.0.0.0/0, '::/0']\n", func(c *Config) { c.Admin.Allow = []string{"0.0.0.0/0", "::/0"} }},
		{"data dir absolute", "data_dir: /var/lib/gw", func(c *Config) { c.DataDir = "/var/lib/gw" }},
		{"timeout duration", "worker_shutdown_timeout: 1m30s", func(c *Config) { c.WorkerShutdownTimeout = 90 * time.Second }},
		{"timeout milliseconds", "worker_shutdown_timeout: 500ms", func(c *Config) { c.WorkerShutdownTimeout = 500 * time.Millisecond }},
		{"timeout integer seconds", "worker_shutdown_timeout: 30", func(c *Config) { c.WorkerShutdownTimeout = 30 * time.Second }},
		{"timeout quoted seconds", `worker_shutdown_timeout: "30"`, func(c *Config) { c.WorkerShutdownTimeout = 30 * time.Second }},
		{"log level debug", "error_log_level: debug", func(c *Config) { c.ErrorLogLevel = "debug" }},
		{"log level error", "error_log_level: error", func(c *Config) { c.ErrorLogLevel = "error" }},
		{"router uri", "router: {http: radixtree_uri}", func(c *Config) { c.Router.HTTP = "radixtree_uri" }},
		{"status on", "status: {enabled: true, listen: 7086}", func(c *Config) { c.Status = Status{Enabled: true, Listen: "0.0.0.0:7086"} }},
		{"router parameters", "router:\n  http: radixtree_uri_with_parameter", func(c *Config) { c.Router.HTTP = "radixtree_uri_with_parameter" }},
		{"rlimit", "worker_rlimit_nofile: 65536", func(c *Config) { c.WorkerRlimitNofile = 65536 }},
		{"access log json off", "access_log: {enabled: false, format: json, buffer: 0}", func(c *Config) {
			c.AccessLog.Enabled, c.AccessLog.Format, c.AccessLog.Buffer = false, "json", 0
		}},
		{"shm sizes", "shm: {limit_count: 64k, metrics: 1g, limit_count_on_full: reject}", func(c *Config) {
			c.Shm.LimitCount, c.Shm.Metrics, c.Shm.LimitCountOnFull = 64<<10, 1<<30, "reject"
		}},
		{"shm bytes", "shm: {limit_count: 1048576}", func(c *Config) { c.Shm.LimitCount = 1 << 20 }},
		{"shm health_check", "shm: {health_check: 64k}", func(c *Config) { c.Shm.HealthCheck = 64 << 10 }},
		{"prometheus", "prometheus: {export_addr: 9092, export_uri: /metrics, max_series: 5}", func(c *Config) {
			c.Prometheus.ExportAddr, c.Prometheus.ExportURI, c.Prometheus.MaxSeries = "0.0.0.0:9092", "/metrics", 5
		}},
		{"yaml alias", "x: &p 9080\n", nil}, // unknown key x; see rejects
		{"alias into list", "node_listen: &l [9081]\n", func(c *Config) { c.NodeListen = []string{"0.0.0.0:9081"} }},
		{"http2", `
node_listen: [9080, "127.0.0.1:9081"]
http2: {max_concurrent_streams: 1, max_field_size: 1k, max_header_size: 1k, recv_timeout: 5s, idle_timeout: 10, h2c_disable: [9080]}
`, func(c *Config) {
			c.NodeListen = []string{"0.0.0.0:9080", "127.0.0.1:9081"}
			c.HTTP2 = HTTP2{MaxConcurrentStreams: 1, MaxFieldSize: 1 << 10, MaxHeaderSize: 1 << 10,
				RecvTimeout: 5 * time.Second, IdleTimeout: 10 * time.Second, H2CDisable: []string{"0.0.0.0:9080"}}
		}},
		{"every key", `
worker_processes: 4
node_listen: [80, 443]
admin:
  listen: 127.0.0.1:9180
  keys: [{name: ops, key: k1}]
  allow: [127.0.0.1]
data_dir: state
worker_shutdown_timeout: 10s
error_log_level: info
`, func(c *Config) {
			// Start from the defaults so that keys added later keep them here.
			*c = *wantDefault()
			c.WorkerProcesses = 4
			c.NodeListen = []string{"0.0.0.0:80", "0.0.0.0:443"}
			c.Admin = Admin{
				Listen: "127.0.0.1:9180",
				Keys:   []AdminKey{{Name: "ops", Key: "k1", Role: "admin"}},
				Allow:  []string{"127.0.0.1/32"},
			}
			c.DataDir = "state"
			c.WorkerShutdownTimeout = 10 * time.Second
			c.ErrorLogLevel = "info"
		}},
	}
	for _, tt := range tests {
		if tt.want == nil {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml), "test.yaml")
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.yaml, err)
			}
			want := wantDefault()
			tt.want(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Parse(%q)\n got %+v\nwant %+v", tt.yaml, got, want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // one per error line, each a prefix of that line (after "f.yaml:")
	}{
		{"workers word", "worker_processes: lots", []string{`1: worker_processes: must be a positive integer or "auto", got "lots"`}},
		{"workers zero", "worker_processes: 0", []string{`1: worker_processes: must be a positive integer or "auto", got 0`}},
		{"workers negative", "worker_processes: -2", []string{`1: worker_processes: must be a positive integer or "auto", got -2`}},
		{"workers float", "worker_processes: 1.5", []string{`1: worker_processes: must be a positive integer or "auto", got 1.5`}},
		{"workers quoted number", `worker_processes: "2"`, []string{`1: worker_processes: must be a positive integer or "auto", got "2"`}},
		{"workers Auto", "worker_processes: Auto", []string{`1: worker_processes: must be a positive integer or "auto", got "Auto"`}},
		{"workers too many", "worker_processes: 5000", []string{`1: worker_processes: must be at most 1024, got 5000`}},
		{"workers null", "worker_processes:", []string{`1: worker_processes: must be a positive integer or "auto", got nothing`}},
		{"workers list", "worker_processes: [1]", []string{`1: worker_processes: must be a positive integer or "auto", got a list`}},

		{"http2 streams zero", "http2: {max_concurrent_streams: 0}", []string{`1: http2.max_concurrent_streams: must be an integer from 1 to 1024, got 0`}},
		{"http2 field size small", "http2: {max_field_size: 100}", []string{`1: http2.max_field_size: must be from 1024 to 1048576 bytes, got 100`}},
		{"http2 field over header", "http2: {max_field_size: 32k}", []string{`1: http2.max_field_size: max_field_size 32768 is larger than max_header_size 16384`}},
		{"http2 idle zero", "http2: {idle_timeout: 0s}", []string{`1: http2.idle_timeout: must be`}},
		{"http2 h2c_disable not listened", "http2: {h2c_disable: [9081]}", []string{`1: http2.h2c_disable[0]: "0.0.0.0:9081" is not a node_listen address`}},
		{"http2 h2c_disable not an address", "http2: {h2c_disable: [nowhere]}", []string{`1: http2.h2c_disable[0]: must be "host:port"`}},
		{"http2 unknown key", "http2: {max_concurrent_stream: 1}", []string{`1: http2.max_concurrent_stream: unknown key`}},
		{"rlimit too small", "worker_rlimit_nofile: 10", []string{`1: worker_rlimit_nofile: must be an integer from 1024 to 1048576, got 10`}},
		{"access log not bool", "access_log: {enabled: yes please}", []string{`1: access_log.enabled: must be true or false, got "yes please"`}},
		{"access log format", "access_log: {format: main}", []string{`1: access_log.format: must be one of combined, json, got "main"`}},
		{"shm size word", "shm: {limit_count: lots}", []string{`1: shm.limit_count: must be a size such as 65536, 64k, 10m or 1g, got "lots"`}},
		{"shm size too small", "shm: {metrics: 1k}", []string{`1: shm.metrics: must be from 65536 to 17179869184 bytes, got "1k"`}},
		{"shm health_check too small", "shm: {health_check: 4k}", []string{`1: shm.health_check: must be from 65536 to 17179869184 bytes, got "4k"`}},
		{"shm on full", "shm: {limit_count_on_full: drop}", []string{`1: shm.limit_count_on_full: must be one of evict, reject, got "drop"`}},
		{"shm unknown", "shm: {lua_dict: 1m}", []string{`1: shm.lua_dict: unknown key`}},
		{"prometheus uri", "prometheus: {export_uri: metrics}", []string{`1: prometheus.export_uri: must start with /, got "metrics"`}},
		{"prometheus on admin", "prometheus: {export_addr: '127.0.0.1:9180'}", []string{`1: prometheus.export_addr: "127.0.0.1:9180" binds the same socket as admin.listen`}},
		{"prometheus series", "prometheus: {max_series: 0}", []string{`1: prometheus.max_series: must be an integer from 1 to 10000000, got 0`}},

		{"listen not a list", "node_listen: 9080", []string{`1: node_listen: must be a list, got 9080`}},
		{"listen empty", "node_listen: []", []string{`1: node_listen: needs at least one address`}},
		{"listen null", "node_listen:", []string{`1: node_listen: needs at least one address`}},
		{"listen port zero", "node_listen: [0]", []string{`1: node_listen[0]: port must be 1-65535, got 0`}},
		{"listen port too big", "node_listen: [65536]", []string{`1: node_listen[0]: port must be 1-65535, got 65536`}},
		{"listen negative port", "node_listen: [-1]", []string{`1: node_listen[0]: must be "host:port", "[ipv6]:port", ":port" or a port number, got -1`}},
		{"listen no port", `node_listen: ["127.0.0.1"]`, []string{`1: node_listen[0]: must be "host:port"`}},
		{"listen named port", `node_listen: ["127.0.0.1:http"]`, []string{`1: node_listen[0]: port must be 1-65535, got "127.0.0.1:http"`}},
		{"listen hostname", `node_listen: ["example.com:80"]`, []string{`1: node_listen[0]: host must be an IP address or localhost, got "example.com:80"`}},
		{"listen bare ipv6", `node_listen: ["::1:80"]`, []string{`1: node_listen[0]: must be "host:port"`}},
		{"listen mapping", "node_listen: [{port: 9080}]", []string{`1: node_listen[0]: must be "host:port", "[ipv6]:port", ":port" or a port number, got a mapping`}},
		{"listen duplicate", "node_listen: [9080, '0.0.0.0:9080']", []string{`1: node_listen[1]: "0.0.0.0:9080" binds the same socket as node_listen[0] "0.0.0.0:9080"`}},
		{"listen wildcard overlap", "node_listen:\n  - '0.0.0.0:80'\n  - 127.0.0.1:80\n", []string{`3: node_listen[1]: "127.0.0.1:80" binds the same socket as node_listen[0] "0.0.0.0:80"`}},
		{"listen v6 wildcard overlap", "node_listen:\n  - '[::]:80'\n  - '[::1]:80'\n", []string{`3: node_listen[1]: "[::1]:80" binds the same socket as node_listen[0] "[::]:80"`}},
		{"listen v6 duplicate", "node_listen: ['[::]:80', '[0::0]:80']", []string{`1: node_listen[1]: "[::]:80" binds the same socket as node_listen[0] "[::]:80"`}},

		{"user three words", "user: root root root", []string{`1: user: must be "user" or "user group", got "root root root"`}},
		{"user list", "user: [root]", []string{`1: user: must be a string, got a list`}},
		{"user bool", "user: true", []string{`1: user: must be a string, got true`}},
		{"user null", "user:", []string{`1: user: must be a string, got nothing`}},
		{"listen one bad one good", "node_listen: [9080, 99999]", []string{`1: node_listen[1]: port must be 1-65535, got 99999`}},

		{"admin not a mapping", "admin: 127.0.0.1:9180", []string{`1: admin: must be a mapping of keys, got "127.0.0.1:9180"`}},
		{"admin unknown key", "admin:\n  listen: 127.0.0.1:9180\n  admin_key: x\n", []string{`3: admin.admin_key: unknown key; known keys here are listen, keys, allow`}},
		{"admin listen bad", "admin:\n  listen: nowhere\n", []string{`2: admin.listen: must be "host:port"`}},
		{"admin listen equals node listen", "node_listen: [127.0.0.1:9180]\n", []string{`1: node_listen[0]: "127.0.0.1:9180" binds the same socket as admin.listen "127.0.0.1:9180"`}},
		{"admin listen collides with wildcard", "admin:\n  listen: 127.0.0.1:9080\n", []string{`2: admin.listen: "127.0.0.1:9080" binds the same socket as node_listen[0] "0.0.0.0:9080"`}},
		{"public admin, no keys", "\nadmin:\n  listen: 0.0.0.0:9180\n", []string{`3: admin.listen: "0.0.0.0:9180" is not a loopback address and admin.keys is empty, so the built-in public key ` + DefaultAdminKey}},
		{"public ipv6 admin, no keys", "admin:\n  listen: '[::]:9180'\n", []string{`2: admin.listen: "[::]:9180" is not a loopback address`}},
		{"lan admin, no keys", "admin:\n  listen: 10.1.2.3:9180\n", []string{`2: admin.listen: "10.1.2.3:9180" is not a loopback address`}},
		{"public admin, default key", "admin:\n  listen: 0.0.0.0:9180\n  keys:\n    - name: ops\n      key: edd1c9f034335f136f87ad84b625c8f1\n", []string{
			`5: admin.keys[0].key: is the built-in public key, refused because admin.listen "0.0.0.0:9180" is not a loopback address (CVE-2020-13945)`}},
		{"public admin, default key as viewer", "admin:\n  listen: 0.0.0.0:9180\n  keys:\n    - {name: ops, key: k1}\n    - {name: v, key: edd1c9f034335f136f87ad84b625c8f1, role: viewer}\n", []string{
			`5: admin.keys[1].key: is the built-in public key`}},
		{"empty key on loopback", "admin:\n  keys: [{name: ops, key: ''}]\n", []string{`2: admin.keys[0].key: must not be empty`}},
		{"empty key in public", "admin:\n  listen: 0.0.0.0:9180\n  keys: [{name: ops, key: ''}]\n", []string{
			`3: admin.keys[0].key: must not be empty: admin.listen "0.0.0.0:9180" is not a loopback address, so an empty key would let anyone`}},
		{"public admin, bad keys not called empty", "admin:\n  listen: 0.0.0.0:9180\n  keys: [{name: ops, key: k1, role: root}]\n", []string{
			`3: admin.keys[0].role: must be one of admin, viewer, got "root"`}},
		{"key with space", "admin:\n  keys: [{name: ops, key: 'a b'}]\n", []string{`2: admin.keys[0].key: must be printable ASCII without spaces`}},
		{"key bool", "admin:\n  keys: [{name: ops, key: true}]\n", []string{`2: admin.keys[0].key: must be a string, got true`}},
		{"key missing", "admin:\n  keys:\n    - name: ops\n", []string{`3: admin.keys[0]: needs a key`}},
		{"name missing", "admin:\n  keys:\n    - key: k1\n", []string{`3: admin.keys[0]: needs a name`}},
		{"name empty", "admin:\n  keys: [{name: '', key: k1}]\n", []string{`2: admin.keys[0].name: must not be empty`}},
		{"key entry null", "admin:\n  keys:\n    -\n", []string{`3: admin.keys[0]: needs a name`, `3: admin.keys[0]: needs a key`}},
		{"key entry scalar", "admin:\n  keys: [k1]\n", []string{`2: admin.keys[0]: must be a mapping of keys, got "k1"`}},
		{"role unknown", "admin:\n  keys: [{name: ops, key: k1, role: root}]\n", []string{`2: admin.keys[0].role: must be one of admin, viewer, got "root"`}},
		{"key entry unknown field", "admin:\n  keys: [{name: ops, key: k1, roles: admin}]\n", []string{`2: admin.keys[0].roles: unknown key; known keys here are name, key, role`}},
		{"names repeat", "admin:\n  keys:\n    - {name: ops, key: k1}\n    - {name: ops, key: k2}\n", []string{`4: admin.keys[1].name: "ops" is already the name of admin.keys[0]`}},
		{"keys repeat", "admin:\n  keys:\n    - {name: a, key: k1}\n    - {name: b, key: k1}\n", []string{`4: admin.keys[1].key: is the same as admin.keys[0].key`}},
		{"keys not a list", "admin:\n  keys: {name: a, key: k}\n", []string{`2: admin.keys: must be a list, got a mapping`}},
		{"allow empty", "admin:\n  allow: []\n", []string{`2: admin.allow: needs at least one CIDR`}},
		{"allow bad cidr", "admin:\n  allow: [10.0.0.0/33]\n", []string{`2: admin.allow[0]: must be a CIDR like 10.0.0.0/8 or an IP address, got "10.0.0.0/33"`}},
		{"allow hostname", "admin:\n  allow: [localhost]\n", []string{`2: admin.allow[0]: must be a CIDR like 10.0.0.0/8 or an IP address, got "localhost"`}},
		{"allow zone", "admin:\n  allow: ['fe80::1%eth0']\n", []string{`2: admin.allow[0]: must be a CIDR like 10.0.0.0/8 or an IP address, got "fe80::1%eth0"`}},
		{"allow list item", "admin:\n  allow: [[1.2.3.4]]\n", []string{`2: admin.allow[0]: must be a string, got a list`}},

		{"data dir empty", "data_dir: ''", []string{`1: data_dir: must not be empty`}},
		{"data dir null", "data_dir:", []string{`1: data_dir: must be a string, got nothing`}},
		{"timeout word", "worker_shutdown_timeout: soon", []string{`1: worker_shutdown_timeout: must be a duration like "240s" or a whole number of seconds, got "soon"`}},
		{"timeout zero", "worker_shutdown_timeout: 0", []string{`1: worker_shutdown_timeout: must be more than zero, got 0`}},
		{"timeout zero duration", "worker_shutdown_timeout: 0s", []string{`1: worker_shutdown_timeout: must be more than zero, got "0s"`}},
		{"timeout negative", "worker_shutdown_timeout: -5s", []string{`1: worker_shutdown_timeout: must be more than zero, got "-5s"`}},
		{"timeout negative seconds", "worker_shutdown_timeout: -5", []string{`1: worker_shutdown_timeout: must be more than zero, got -5`}},
		{"timeout float", "worker_shutdown_timeout: 1.5", []string{`1: worker_shutdown_timeout: must be a duration like "240s"`}},
		{"timeout overflow", "worker_shutdown_timeout: 99999999999999999999", []string{`1: worker_shutdown_timeout: must be at most 9223372036 seconds`}},
		{"timeout too many seconds", "worker_shutdown_timeout: 9223372037", []string{`1: worker_shutdown_timeout: must be at most 9223372036 seconds`}},
		{"log level warning", "error_log_level: warning", []string{`1: error_log_level: must be one of debug, info, warn, error, got "warning"`}},
		{"router unknown", "router: {http: radixtree_host_uri_with_parameter}", []string{`1: router.http: must be one of radixtree_host_uri, radixtree_uri, radixtree_uri_with_parameter, got "radixtree_host_uri_with_parameter"`}},
		{"router unknown key", "router: {stream: x}", []string{`1: router.stream: unknown key; known keys here are http`}},
		{"status on the admin port", "status: {enabled: true, listen: 127.0.0.1:9180}", []string{`1: status.listen: "127.0.0.1:9180" binds the same socket as admin.listen; give the status API its own address`}},
		{"status on a data port", "status: {enabled: true, listen: 9080}", []string{`1: status.listen: "0.0.0.0:9080" binds the same socket as node_listen[0] "0.0.0.0:9080"; give the status API its own address`}},
		{"status bad listen", "status: {listen: nowhere}", []string{`1: status.listen: `}},
		{"log level upper case", "error_log_level: WARN", []string{`1: error_log_level: must be one of debug, info, warn, error, got "WARN"`}},

		{"unknown top key", "apisix:\n  node_listen: [9080]\n", []string{`1: apisix: unknown key; known keys here are worker_processes, node_listen, admin, data_dir, worker_shutdown_timeout, error_log_level`}},
		{"repeated key", "worker_processes: 1\nworker_processes: 2\n", []string{`2: worker_processes: set twice (first at line 1)`}},
		{"merge key", "<<: {worker_processes: 1}\n", []string{`1: <<: unknown key`}},
		{"alias to unknown", "x: &p 9080\n", []string{`1: x: unknown key`}},
		{"top level list", "- worker_processes: 2\n", []string{`1: the file must be a mapping of keys`}},
		{"top level scalar", "hello\n", []string{`1: the file must be a mapping of keys`}},
		{"syntax error", "worker_processes: 2\n  bad: indent\n", []string{`2: mapping values are not allowed in this context`}},
		{"unclosed list", "worker_processes: 2\nnode_listen: [9080\n", []string{`1: did not find expected ',' or ']'`}},
		{"tab indentation", "admin:\n\tlisten: x\n", []string{`2: found character that cannot start any token`}},
		{"two documents", "worker_processes: 2\n---\nworker_processes: 3\n", []string{`2: a second YAML document`}},
		{"complex key", "? [a]\n: 1\n", []string{`1: keys must be plain names, got a list`}},

		{"every problem reported, in file order", `
worker_processes: lots
node_listen: [0]
admin:
  listen: 0.0.0.0:9180
  keys: [{name: a, key: k, role: god}]
  allow: [nope]
data_dir: ""
worker_shutdown_timeout: never
error_log_level: loud
extra: 1
`, []string{
			`2: worker_processes: must be a positive integer or "auto", got "lots"`,
			`3: node_listen[0]: port must be 1-65535, got 0`,
			`6: admin.keys[0].role: must be one of admin, viewer, got "god"`,
			`7: admin.allow[0]: must be a CIDR like 10.0.0.0/8 or an IP address, got "nope"`,
			`8: data_dir: must not be empty`,
			`9: worker_shutdown_timeout: must be a duration like "240s" or a whole number of seconds, got "never"`,
			`10: error_log_level: must be one of debug, info, warn, error, got "loud"`,
			`11: extra: unknown key`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "f.yaml")
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tt.yaml, c)
			}
			if c != nil {
				t.Errorf("Parse returned a Config alongside the error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, want := range tt.want {
				if !strings.HasPrefix(lines[i], "f.yaml:"+want) {
					t.Errorf("error %d:\n got %s\nwant f.yaml:%s...", i, lines[i], want)
				}
			}
		})
	}
}

func TestErrorsAreFieldErrors(t *testing.T) {
	_, err := Parse([]byte("worker_processes: lots\nerror_log_level: loud\n"), "f.yaml")
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T does not unwrap to a list", err)
	}
	want := []FieldError{
		{Source: "f.yaml", Line: 1, Path: "worker_processes", Msg: `must be a positive integer or "auto", got "lots"`},
		{Source: "f.yaml", Line: 2, Path: "error_log_level", Msg: `must be one of debug, info, warn, error, got "loud"`},
	}
	errs := joined.Unwrap()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d", len(errs), len(want))
	}
	for i, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) || *fe != want[i] {
			t.Errorf("error %d = %#v, want %#v", i, e, want[i])
		}
	}
}

func TestFieldErrorWithoutLine(t *testing.T) {
	e := &FieldError{Source: "f.yaml", Path: "admin.listen", Msg: "bad"}
	if got := e.Error(); got != "f.yaml: admin.listen: bad" {
		t.Fatalf("got %q", got)
	}
	e = &FieldError{Source: "f.yaml", Line: 3, Msg: "bad"}
	if got := e.Error(); got != "f.yaml:3: bad" {
		t.Fatalf("got %q", got)
	}
}

func TestWorkers(t *testing.T) {
	tests := []struct {
		configured, want int
	}{
		{0, runtime.NumCPU()},
		{1, 1},
		{7, 7},
	}
	for _, tt := range tests {
		c := &Config{WorkerProcesses: tt.configured}
		if got := c.Workers(); got != tt.want {
			t.Errorf("Workers() with worker_processes %d = %d, want %d", tt.configured, got, tt.want)
		}
	}
}

func TestAdminKeys(t *testing.T) {
	builtIn := []AdminKey{{Name: "admin", Key: DefaultAdminKey, Role: "admin"}}
	if got := Default().AdminKeys(); !reflect.DeepEqual(got, builtIn) {
		t.Errorf("no keys configured: AdminKeys() = %+v, want %+v", got, builtIn)
	}
	c, err := Parse([]byte("admin:\n  keys: [{name: ops, key: k1}, {name: v, key: k2, role: viewer}]\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []AdminKey{{Name: "ops", Key: "k1", Role: "admin"}, {Name: "v", Key: "k2", Role: "viewer"}}
	if got := c.AdminKeys(); !reflect.DeepEqual(got, want) {
		t.Errorf("AdminKeys() = %+v, want %+v", got, want)
	}
}

func TestAllowNets(t *testing.T) {
	c, err := Parse([]byte("admin:\n  allow: [10.0.0.0/8, 192.168.1.7, '::1', '::ffff:172.16.0.0/108']\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nets := c.AllowNets()
	tests := []struct {
		ip   string
		want bool
	}{
		{"10.1.2.3", true},
		{"11.0.0.1", false},
		{"192.168.1.7", true},
		{"192.168.1.8", false},
		{"::1", true},
		{"127.0.0.1", false},
		{"172.16.9.9", true}, // in the v4-mapped network
		{"172.32.0.1", false},
	}
	for _, tt := range tests {
		got := false
		for _, n := range nets {
			got = got || n.Contains(net.ParseIP(tt.ip))
		}
		if got != tt.want {
			t.Errorf("%s allowed = %v, want %v", tt.ip, got, tt.want)
		}
	}
	// A hand-built Config with a bad entry narrows the list rather than widening it.
	hand := &Config{Admin: Admin{Allow: []string{"junk", "10.0.0.0/8"}}}
	if got := hand.AllowNets(); len(got) != 1 || got[0].String() != "10.0.0.0/8" {
		t.Errorf("AllowNets() with a bad entry = %v, want only 10.0.0.0/8", got)
	}
}

// FuzzParse checks that no input panics and that whatever Parse accepts holds the
// invariants the rest of gw relies on.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "worker_processes: 2", "node_listen: [9080, '[::1]:80']",
		"admin:\n  listen: 0.0.0.0:9180\n  keys: [{name: a, key: b}]\n  allow: [10.0.0.1]\n",
		"worker_shutdown_timeout: 1m", "a: &x [1]\nb: *x\n", "{",
		"admin:\n  listen: 0.0.0.0:9180\n  keys: [{name: a, key: '${{GW_FUZZ_KEY:=k}}'}]\n",
		"worker_processes: ${{W:=2}}", "data_dir: '$${{A:=}}{{B:=}}'", "${{K:=data_dir}}: &a '${{X:=${{Y}}}}'",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if c != nil {
				t.Fatal("Config and error both returned")
			}
			return
		}
		if c.WorkerProcesses < 0 || c.WorkerProcesses > maxWorkers || len(c.NodeListen) == 0 ||
			c.Admin.Listen == "" || len(c.Admin.Allow) == 0 || c.DataDir == "" || c.WorkerShutdownTimeout <= 0 {
			t.Fatalf("accepted an invalid config: %+v", c)
		}
		if len(c.AllowNets()) != len(c.Admin.Allow) {
			t.Fatalf("admin.allow %v does not all parse", c.Admin.Allow)
		}
		if listenCollision(c.Admin.Listen, c.NodeListen) >= 0 {
			t.Fatalf("admin.listen %s collides with node_listen %v", c.Admin.Listen, c.NodeListen)
		}
		for _, k := range c.AdminKeys() {
			if k.Key == "" || (k.Key == DefaultAdminKey && !isLoopbackListen(c.Admin.Listen)) {
				t.Fatalf("accepted key %+v on %s", k, c.Admin.Listen)
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	data := []byte("worker_processes: 2\nnode_listen: [9080, 9081]\nadmin:\n  keys: [{name: ops, key: k1}]\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, "bench.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
