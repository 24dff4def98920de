package conf

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// TLSListener is config.yaml's ssl section: the TLS listener, whose certificates come from the
// Admin API's ssls objects and change without a reload.
type TLSListener struct {
	Enabled bool `json:"enabled"`
	// Listen are the TLS addresses, host:port, in node_listen's forms.
	Listen []string `json:"listen"`
	// FallbackSNI names the certificate served to a client that sends no SNI (it connected
	// by IP address) or one no ssl object has; empty means those handshakes fail.
	FallbackSNI string `json:"fallback_sni"`
}

// DataListen returns every data-plane address: node_listen, then ssl.listen when the TLS
// listener is on. The master opens one socket group per address.
func (c *Config) DataListen() []string {
	if !c.SSL.Enabled {
		return c.NodeListen
	}
	return append(append(make([]string, 0, len(c.NodeListen)+len(c.SSL.Listen)), c.NodeListen...), c.SSL.Listen...)
}

// IsTLSListen reports whether address is one of the TLS listener's, so it is served with
// TLS. config validation keeps it apart from every other listen address.
func (c *Config) IsTLSListen(address string) bool {
	if !c.SSL.Enabled {
		return false
	}
	for _, a := range c.SSL.Listen {
		if a == address {
			return true
		}
	}
	return false
}

// sslSection reads config.yaml's ssl section: the TLS listener's keys into t, and
// ssl_trusted_certificate, which is about upstreams but lives here as in APISIX, into trust.
func (l *loader) sslSection(path string, n *yaml.Node, t *TLSListener, trust *UpstreamTrust) {
	l.mapping(n, path, []yamlField{
		{"enabled", yamlInto(&t.Enabled, l.boolean)},
		// nodeListen's rules: at least one address, none twice.
		{"listen", yamlInto(&t.Listen, l.nodeListen)},
		{"fallback_sni", func(p string, v *yaml.Node) {
			s, ok := l.scalarString(p, v)
			if !ok {
				return
			}
			if s != "" {
				if err := CheckSNI(s); err != nil {
					l.errorf(v.Line, p, "%v", err)
					return
				}
				s = NormalizeSNI(s)
			}
			t.FallbackSNI = s
		}},
		{TrustedCertificateKey, func(p string, v *yaml.Node) {
			if isYAMLNull(v) {
				return // the default: the system's roots alone
			}
			if s, ok := l.scalarString(p, v); ok {
				trust.SSLTrustedCertificate = s
			}
		}},
	})
}

// crossCheckTLS keeps each TLS address apart from the plain data-plane, Admin API and
// metrics addresses: one socket cannot speak both.
func (l *loader) crossCheckTLS(c *Config) {
	if !c.SSL.Enabled {
		return
	}
	for i, addr := range c.SSL.Listen {
		p := fmt.Sprintf("ssl.listen[%d]", i)
		line := l.lines[l.pick(p, "ssl.listen", "ssl")]
		if j := listenCollision(addr, c.NodeListen); j >= 0 {
			l.errorf(line, p, "%q binds the same socket as node_listen[%d] %q; give TLS its own port (9443 by default)", addr, j, c.NodeListen[j])
		}
		if c.Admin.Listen != "" && listenCollision(addr, []string{c.Admin.Listen}) >= 0 {
			l.errorf(line, p, "%q binds the same socket as admin.listen %q; give TLS its own port", addr, c.Admin.Listen)
		}
		if c.Prometheus.Enabled && c.Prometheus.ExportAddr != "" && listenCollision(addr, []string{c.Prometheus.ExportAddr}) >= 0 {
			l.errorf(line, p, "%q binds the same socket as prometheus.export_addr %q; give TLS its own port", addr, c.Prometheus.ExportAddr)
		}
	}
}
