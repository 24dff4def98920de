package conf

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
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

// CheckFiles reads the files config.yaml names, as the workers will: today the CA bundle
// of ssl.ssl_trusted_certificate. Parse checks the text alone; gwctl test and gwctl start
// call this to report a missing or broken file with its key and path before any worker
// fails on it. Relative paths are relative to prefix.
func (c *Config) CheckFiles(prefix string) error {
	_, err := TrustedCertificates(prefix, c.SSLTrustedCertificate)
	return err
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
