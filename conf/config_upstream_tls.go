package conf

// TrustedCertificateKey is APISIX's apisix.ssl.ssl_trusted_certificate: the CA bundle
// that upstream certificates are verified against, besides the system's roots.
const TrustedCertificateKey = "ssl_trusted_certificate"

// UpstreamTrust is what the certificates of https upstreams are verified against. It is
// set in config.yaml's ssl section, where APISIX has it, though it is about the connections
// to upstreams, not the TLS listener.
type UpstreamTrust struct {
	// SSLTrustedCertificate is ssl.ssl_trusted_certificate: a PEM file of CA certificates
	// trusted besides the system's roots, relative to the prefix unless absolute; empty
	// for the system roots alone. conf reads no file: internal/confio's Check reads it
	// for gwctl test and start, and its TrustedCertificates for each worker at start.
	SSLTrustedCertificate string `json:"ssl_trusted_certificate"`
}
