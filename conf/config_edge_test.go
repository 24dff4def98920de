package conf

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// wantDefaultEdge is the edge keys' defaults written out independently of config.yaml:
// nginx's and APISIX's values, and the header buffer gw chose.
func wantDefaultEdge() Edge {
	return Edge{
		ClientHeaderBufferSize: 16 << 10,
		ClientMaxBodySize:      0,
		ClientHeaderTimeout:    60 * time.Second,
		ClientBodyTimeout:      60 * time.Second,
		KeepaliveTimeout:       60 * time.Second,
		SendTimeout:            60 * time.Second,
		WorkerConnections:      10620,
		RealIPFrom:             []string{},
		RealIPHeader:           "X-Real-IP",
		RealIPRecursive:        false,
	}
}

func TestEdgeAccepts(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(e *Edge)
	}{
		{"header buffer floor", "client_header_buffer_size: 1k", func(e *Edge) { e.ClientHeaderBufferSize = 1 << 10 }},
		{"header buffer ceiling", "client_header_buffer_size: 1m", func(e *Edge) { e.ClientHeaderBufferSize = 1 << 20 }},
		{"header buffer bytes", "client_header_buffer_size: 4096", func(e *Edge) { e.ClientHeaderBufferSize = 4096 }},
		{"body size nginx default", "client_max_body_size: 1m", func(e *Edge) { e.ClientMaxBodySize = 1 << 20 }},
		{"body size unlimited", "client_max_body_size: 0", func(e *Edge) { e.ClientMaxBodySize = 0 }},
		{"body size large", "client_max_body_size: 8g", func(e *Edge) { e.ClientMaxBodySize = 8 << 30 }},
		{"header timeout", "client_header_timeout: 2s", func(e *Edge) { e.ClientHeaderTimeout = 2 * time.Second }},
		{"body timeout seconds", "client_body_timeout: 30", func(e *Edge) { e.ClientBodyTimeout = 30 * time.Second }},
		{"keepalive", "keepalive_timeout: 75s", func(e *Edge) { e.KeepaliveTimeout = 75 * time.Second }},
		{"send", "send_timeout: 500ms", func(e *Edge) { e.SendTimeout = 500 * time.Millisecond }},
		{"connections floor", "worker_connections: 16", func(e *Edge) { e.WorkerConnections = 16 }},
		{"connections at nofile", "worker_connections: 20480", func(e *Edge) { e.WorkerConnections = 20480 }},
		{"connections with more files", "worker_rlimit_nofile: 65536\nworker_connections: 65536", func(e *Edge) { e.WorkerConnections = 65536 }},
		{"real ip from cidrs and ips", "real_ip_from: [10.0.0.0/8, 192.168.1.7, '::1', 'fd00::/8']", func(e *Edge) {
			e.RealIPFrom = []string{"10.0.0.0/8", "192.168.1.7/32", "::1/128", "fd00::/8"}
		}},
		{"real ip from masked and unmapped", "real_ip_from: [10.1.2.3/8, '::ffff:10.0.0.1', '::ffff:10.0.0.0/104']", func(e *Edge) {
			e.RealIPFrom = []string{"10.0.0.0/8", "10.0.0.1/32", "10.0.0.0/8"}
		}},
		{"real ip from null is nobody", "real_ip_from:", func(e *Edge) {}},
		{"real ip header xff", "real_ip_header: X-Forwarded-For", func(e *Edge) { e.RealIPHeader = "X-Forwarded-For" }},
		{"real ip header token chars", "real_ip_header: CF-Connecting-IP", func(e *Edge) { e.RealIPHeader = "CF-Connecting-IP" }},
		{"real ip recursive", "real_ip_recursive: true", func(e *Edge) { e.RealIPRecursive = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			want := wantDefaultEdge()
			tt.want(&want)
			if !reflect.DeepEqual(got.Edge, want) {
				t.Fatalf("Edge = %+v\nwant   %+v", got.Edge, want)
			}
		})
	}
}

func TestEdgeRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"header buffer too small", "client_header_buffer_size: 512", `test.yaml:1: client_header_buffer_size: must be from 1024 to 1048576 bytes, got 512`},
		{"header buffer one byte too large", "client_header_buffer_size: 1048577", `test.yaml:1: client_header_buffer_size: must be a size such as 65536, 64k, 10m or 1g, got 1048577`},
		{"header buffer too large", "client_header_buffer_size: 2m", `test.yaml:1: client_header_buffer_size: must be a size such as 65536, 64k, 10m or 1g, got "2m"`},
		{"header buffer not a size", "client_header_buffer_size: big", `test.yaml:1: client_header_buffer_size: must be a size such as 65536, 64k, 10m or 1g, got "big"`},
		{"body size negative", "client_max_body_size: -1", `test.yaml:1: client_max_body_size: must be from 0 to 1125899906842624 bytes, got -1`},
		{"body size unit", "client_max_body_size: 1t", `test.yaml:1: client_max_body_size: must be a size such as 65536, 64k, 10m or 1g, got "1t"`},
		{"header timeout zero", "client_header_timeout: 0s", `test.yaml:1: client_header_timeout: must be more than zero, got "0s"`},
		{"body timeout words", "client_body_timeout: soon", `test.yaml:1: client_body_timeout: must be a duration like "240s" or a whole number of seconds, got "soon"`},
		{"keepalive negative", "keepalive_timeout: -5s", `test.yaml:1: keepalive_timeout: must be more than zero, got "-5s"`},
		{"send list", "send_timeout: [1s]", `test.yaml:1: send_timeout: must be a duration like "240s" or a whole number of seconds, got a list`},
		{"connections too few", "worker_connections: 15", `test.yaml:1: worker_connections: must be an integer from 16 to 1048576, got 15`},
		{"connections not a number", "worker_connections: many", `test.yaml:1: worker_connections: must be an integer from 16 to 1048576, got "many"`},
		{"connections past nofile", "worker_connections: 30000", `test.yaml:1: worker_connections: worker_connections 30000 is more than worker_rlimit_nofile 20480`},
		{"nofile below connections", "worker_rlimit_nofile: 4096", `test.yaml:1: worker_rlimit_nofile: worker_connections 10620 is more than worker_rlimit_nofile 4096`},
		{"real ip from not a list", "real_ip_from: 10.0.0.0/8", `test.yaml:1: real_ip_from: must be a list, got "10.0.0.0/8"`},
		{"real ip from bad cidr", "real_ip_from: [10.0.0.0/33]", `test.yaml:1: real_ip_from[0]: must be a CIDR like 10.0.0.0/8 or an IP address, got "10.0.0.0/33"`},
		{"real ip from host name", "real_ip_from: [10.0.0.1, lb.internal]", `test.yaml:1: real_ip_from[1]: must be a CIDR like 10.0.0.0/8 or an IP address, got "lb.internal"`},
		{"real ip from zone", "real_ip_from: ['fe80::1%eth0']", `test.yaml:1: real_ip_from[0]: must be a CIDR like 10.0.0.0/8 or an IP address, got "fe80::1%eth0"`},
		{"real ip from unix", "real_ip_from: ['unix:']", `test.yaml:1: real_ip_from[0]: "unix:" does not apply: gw's data plane listens on TCP only`},
		{"real ip from mapping item", "real_ip_from: [{a: b}]", `test.yaml:1: real_ip_from[0]: must be a string, got a mapping`},
		{"real ip header empty", `real_ip_header: ""`, `test.yaml:1: real_ip_header: must not be empty`},
		{"real ip header space", `real_ip_header: "X Real IP"`, `test.yaml:1: real_ip_header: must be a header name such as X-Real-IP or X-Forwarded-For (letters, digits and !#$%&'*+-.^_` + "`" + `|~), got "X Real IP"`},
		{"real ip header colon", `real_ip_header: "X-Real-IP:"`, `got "X-Real-IP:"`},
		{"real ip header proxy protocol", "real_ip_header: proxy_protocol", `test.yaml:1: real_ip_header: proxy_protocol is not supported`},
		{"real ip recursive string", "real_ip_recursive: on", `test.yaml:1: real_ip_recursive: must be true or false, got "on"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yaml")
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestRealIPNets(t *testing.T) {
	e := Edge{RealIPFrom: []string{"10.0.0.0/8", "not a cidr", "::1/128"}}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	if got := e.RealIPNets(); !reflect.DeepEqual(got, want) {
		t.Fatalf("RealIPNets() = %v, want %v", got, want)
	}
}

func TestIsTokenByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := c > ' ' && c < 0x7f && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, rune(c))
		if got := IsTokenByte(byte(c)); got != want {
			t.Errorf("IsTokenByte(%q) = %v, want %v", rune(c), got, want)
		}
	}
}
