package conf

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// trustedCertificateKey is APISIX's apisix.ssl.ssl_trusted_certificate: the CA bundle
// that upstream certificates are verified against, besides the system's roots.
const trustedCertificateKey = "ssl_trusted_certificate"

// UpstreamTrust is what the certificates of https upstreams are verified against. It is
// set in config.yaml's ssl section, where APISIX has it, though it is about the connections
// to upstreams, not the TLS listener.
type UpstreamTrust struct {
	// SSLTrustedCertificate is ssl.ssl_trusted_certificate: a PEM file of CA certificates
	// trusted besides the system's roots, relative to the prefix unless absolute; empty
	// for the system roots alone. Workers load it at start (TrustedCertificates).
	SSLTrustedCertificate string `json:"ssl_trusted_certificate"`
}

// takeTrustedCertificate reads ssl.ssl_trusted_certificate out of the ssl section n into
// dst and returns n without it, for sslSection to read the rest.
func (l *loader) takeTrustedCertificate(path string, n *yaml.Node, dst *string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return n // sslSection reports what is wrong with it
	}
	rest := *n
	rest.Content = make([]*yaml.Node, 0, len(n.Content))
	firstLine := 0
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlDeref(n.Content[i]), yamlDeref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value != trustedCertificateKey {
			rest.Content = append(rest.Content, n.Content[i], n.Content[i+1])
			continue
		}
		p := memberPath(path, trustedCertificateKey)
		if firstLine != 0 {
			l.errorf(k.Line, p, "set twice (first at line %d); keep one", firstLine)
			continue
		}
		firstLine = k.Line
		l.lines[p] = v.Line
		if isYAMLNull(v) {
			continue
		}
		if s, ok := l.scalarString(p, v); ok {
			*dst = s
		}
	}
	return &rest
}

// TrustedCertificates returns the roots that upstream certificates are verified against:
// the system's, plus the CA certificates in the PEM file at path (relative to prefix
// unless absolute). An empty path gives nil, which crypto/tls reads as the system roots.
// A file that cannot be read, or holds anything but certificates, is an error that names
// it.
func TrustedCertificates(prefix, path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(prefix, path)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ssl.%s: %w", trustedCertificateKey, err)
	}
	certs, err := ParseCertificates(string(text))
	if err != nil {
		return nil, fmt.Errorf("ssl.%s: %s: %v", trustedCertificateKey, path, err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool() // no system store here: the file's CAs alone
	}
	for _, c := range certs {
		roots.AddCert(c)
	}
	return roots, nil
}
