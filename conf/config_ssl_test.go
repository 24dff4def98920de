package conf

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSSLSection(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    TLSListener
		trust   string // ssl_trusted_certificate
		wantErr string // prefix of the one error line after "f.yaml:"
	}{
		{name: "default off", yaml: "", want: TLSListener{Listen: []string{"0.0.0.0:9443"}}},
		{name: "on", yaml: "ssl: {enabled: true}", want: TLSListener{Enabled: true, Listen: []string{"0.0.0.0:9443"}}},
		{name: "listen forms", yaml: "ssl: {enabled: true, listen: [443, '127.0.0.1:8443', '[::1]:9443']}",
			want: TLSListener{Enabled: true, Listen: []string{"0.0.0.0:443", "127.0.0.1:8443", "[::1]:9443"}}},
		{name: "fallback normalised", yaml: "ssl: {fallback_sni: Example.COM.}", want: TLSListener{Listen: []string{"0.0.0.0:9443"}, FallbackSNI: "example.com"}},
		{name: "fallback wildcard", yaml: "ssl: {fallback_sni: '*.example.com'}", want: TLSListener{Listen: []string{"0.0.0.0:9443"}, FallbackSNI: "*.example.com"}},
		{name: "fallback empty", yaml: `ssl: {fallback_sni: ""}`, want: TLSListener{Listen: []string{"0.0.0.0:9443"}}},
		// Off, the addresses are not bound, so they cannot collide.
		{name: "off collides with nothing", yaml: "ssl: {listen: [9080]}", want: TLSListener{Listen: []string{"0.0.0.0:9080"}}},
		{name: "trusted certificate", yaml: "ssl: {enabled: true, ssl_trusted_certificate: conf/ca.pem}",
			want: TLSListener{Enabled: true, Listen: []string{"0.0.0.0:9443"}}, trust: "conf/ca.pem"},
		{name: "trusted certificate null", yaml: "ssl: {ssl_trusted_certificate: }", want: TLSListener{Listen: []string{"0.0.0.0:9443"}}},

		{name: "enabled not bool", yaml: "ssl: {enabled: yes please}", wantErr: `1: ssl.enabled: must be true or false, got "yes please"`},
		{name: "listen empty", yaml: "ssl: {listen: []}", wantErr: `1: ssl.listen: needs at least one address`},
		{name: "listen bad", yaml: "ssl: {listen: [0]}", wantErr: `1: ssl.listen[0]: port must be 1-65535, got 0`},
		{name: "listen twice", yaml: "ssl: {listen: [443, '0.0.0.0:443']}", wantErr: `1: ssl.listen[1]: "0.0.0.0:443" binds the same socket as ssl.listen[0]`},
		{name: "unknown key", yaml: "ssl: {ssl_protocols: TLSv1.3}", wantErr: `1: ssl.ssl_protocols: unknown key`},
		{name: "fallback ip", yaml: "ssl: {fallback_sni: 10.0.0.1}", wantErr: `1: ssl.fallback_sni: must be a host name, got the IP address "10.0.0.1"`},
		{name: "fallback bad", yaml: "ssl: {fallback_sni: 'a b'}", wantErr: `1: ssl.fallback_sni: must be a host name`},
		{name: "fallback not string", yaml: "ssl: {fallback_sni: [a]}", wantErr: `1: ssl.fallback_sni: must be a string, got a list`},
		{name: "trusted certificate not string", yaml: "ssl: {ssl_trusted_certificate: {a: b}}", wantErr: `1: ssl.ssl_trusted_certificate: must be a string, got a mapping`},
		{name: "trusted certificate twice", yaml: "ssl:\n  ssl_trusted_certificate: a\n  ssl_trusted_certificate: b",
			wantErr: `3: ssl.ssl_trusted_certificate: set twice (first at line 2); keep one`},
		{name: "unknown key lists every key", yaml: "ssl: {bogus: 1}",
			wantErr: `1: ssl.bogus: unknown key; known keys here are enabled, listen, fallback_sni, ssl_trusted_certificate`},
		{name: "on node_listen", yaml: "node_listen: [9080]\nssl:\n  enabled: true\n  listen: ['127.0.0.1:9080']",
			wantErr: `4: ssl.listen[0]: "127.0.0.1:9080" binds the same socket as node_listen[0] "0.0.0.0:9080"`},
		{name: "on admin", yaml: "ssl: {enabled: true, listen: ['127.0.0.1:9180']}",
			wantErr: `1: ssl.listen[0]: "127.0.0.1:9180" binds the same socket as admin.listen "127.0.0.1:9180"`},
		{name: "on prometheus", yaml: "ssl: {enabled: true, listen: [9091]}",
			wantErr: `1: ssl.listen[0]: "0.0.0.0:9091" binds the same socket as prometheus.export_addr "127.0.0.1:9091"`},
		{name: "default listen on a moved node_listen", yaml: "node_listen: [9443]\nssl: {enabled: true}",
			wantErr: `2: ssl.listen[0]: "0.0.0.0:9443" binds the same socket as node_listen[0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "f.yaml")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse(%q): %v", tt.yaml, err)
				}
				if !reflect.DeepEqual(c.SSL, tt.want) {
					t.Fatalf("Parse(%q).SSL = %+v, want %+v", tt.yaml, c.SSL, tt.want)
				}
				if c.SSLTrustedCertificate != tt.trust {
					t.Fatalf("Parse(%q).SSLTrustedCertificate = %q, want %q", tt.yaml, c.SSLTrustedCertificate, tt.trust)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse(%q) accepted, want %q", tt.yaml, tt.wantErr)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "f.yaml:"+tt.wantErr) {
				t.Fatalf("got %v\nwant one line f.yaml:%s...", err, tt.wantErr)
			}
		})
	}
}

func TestDataListen(t *testing.T) {
	c := &Config{NodeListen: []string{"0.0.0.0:9080"}, SSL: TLSListener{Listen: []string{"0.0.0.0:9443"}}}
	if got := c.DataListen(); !reflect.DeepEqual(got, []string{"0.0.0.0:9080"}) {
		t.Errorf("off: DataListen() = %v", got)
	}
	if c.IsTLSListen("0.0.0.0:9443") {
		t.Error("off: 0.0.0.0:9443 is TLS")
	}
	c.SSL.Enabled = true
	if got := c.DataListen(); !reflect.DeepEqual(got, []string{"0.0.0.0:9080", "0.0.0.0:9443"}) {
		t.Errorf("on: DataListen() = %v", got)
	}
	if !c.IsTLSListen("0.0.0.0:9443") || c.IsTLSListen("0.0.0.0:9080") {
		t.Error("on: IsTLSListen wrong")
	}
	// DataListen must not write into NodeListen's spare capacity.
	c.NodeListen = append(make([]string, 0, 4), "0.0.0.0:9080")
	_ = c.DataListen()
	if got := c.NodeListen[:2][1]; got != "" {
		t.Errorf("DataListen wrote %q into NodeListen's backing array", got)
	}
}
