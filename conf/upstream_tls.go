package conf

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// UpstreamTLS is an upstream's tls: the client certificate gw shows to https nodes that
// ask for one (mTLS), and whether gw checks the nodes' certificates. Unlike APISIX, whose
// verify is documented for kafka only and whose nginx leaves proxy_ssl_verify off, gw
// verifies every https node unless verify is false.
//
// ClientKey is a private key: String and GoString leave it out.
type UpstreamTLS struct {
	// ClientCert and ClientKey are a PEM certificate (chain) and its private key.
	ClientCert string `json:"client_cert,omitempty"`
	ClientKey  string `json:"client_key,omitempty"`
	// ClientCertID names an ssls object of type "client" holding the pair instead. The
	// worker copies that pair in (Snapshot.ResolveClientCerts) before compiling.
	ClientCertID ID `json:"client_cert_id,omitempty"`
	// Verify is nil for the default, true.
	Verify *bool `json:"verify,omitempty"`
}

// Verifies reports whether the nodes' certificates are checked: unless verify is false.
// A nil t verifies.
// onlyVerifyOff reports whether t says nothing but "verify": false.
func (t *UpstreamTLS) onlyVerifyOff() bool {
	return t.Verify != nil && !*t.Verify && t.ClientCert == "" && t.ClientKey == "" && t.ClientCertID == ""
}

func (t *UpstreamTLS) Verifies() bool {
	return t == nil || t.Verify == nil || *t.Verify
}

// String describes t without its private key, so that logging one leaks nothing.
func (t UpstreamTLS) String() string {
	cert := "none"
	switch {
	case t.ClientCertID != "":
		cert = "ssl " + string(t.ClientCertID)
	case t.ClientCert != "":
		cert = "inline"
	}
	return fmt.Sprintf("upstream tls (verify %t, client certificate %s)", t.Verifies(), cert)
}

// GoString is String, for %#v.
func (t UpstreamTLS) GoString() string { return t.String() }

// upstreamTLSFields is APISIX's upstream tls schema (schema_def.lua). The PEM readers
// never put the value in a message.
var upstreamTLSFields = fieldDecoders[UpstreamTLS]{
	"client_cert":    into(func(t *UpstreamTLS) *string { return &t.ClientCert }, readPEM),
	"client_key":     into(func(t *UpstreamTLS) *string { return &t.ClientKey }, readPEM),
	"client_cert_id": into(func(t *UpstreamTLS) *ID { return &t.ClientCertID }, parseID),
	"verify":         into(func(t *UpstreamTLS) **bool { return &t.Verify }, optional(asBool)),
}

// decodeUpstreamTLS decodes tls and applies APISIX's dependencies: client_cert and
// client_key come together, and client_cert_id replaces both. The certificate itself is
// checked by CheckClientCertificate, which the Admin API runs on writes: stored objects
// are decoded again for every snapshot, and a certificate that expires while stored must
// not stop the others from being served.
func decodeUpstreamTLS(path string, raw json.RawMessage) (*UpstreamTLS, error) {
	var t UpstreamTLS
	members, err := upstreamTLSFields.decode(&t, path, raw)
	if err != nil {
		return nil, err
	}
	_, hasCert := members["client_cert"]
	_, hasKey := members["client_key"]
	_, hasID := members["client_cert_id"]
	switch {
	case hasID && (hasCert || hasKey):
		return nil, &ObjectError{Path: memberPath(path, "client_cert_id"), Reason: "give either client_cert_id or client_cert and client_key, not both"}
	case hasCert && !hasKey:
		return nil, &ObjectError{Path: memberPath(path, "client_key"), Reason: "is required with client_cert: the private key of the client certificate"}
	case hasKey && !hasCert:
		return nil, &ObjectError{Path: memberPath(path, "client_cert"), Reason: "is required with client_key: the client certificate the key belongs to"}
	}
	return &t, nil
}

// validateTLS is the rule between tls and scheme: tls is about the TLS connections of an
// https or grpcs upstream, and anywhere else it would silently do nothing. The one
// exception is tls holding only "verify": false, which asks for nothing a plaintext
// connection does not already do; APISIX accepts it on any scheme and APISIX Dashboard's
// upstream form sends it with every upstream, whatever the scheme.
func (u *Upstream) validateTLS(path string) error {
	if u.TLS == nil || u.Scheme == "https" || u.Scheme == "grpcs" || u.TLS.onlyVerifyOff() {
		return nil
	}
	scheme := u.Scheme
	if scheme == "" {
		scheme = DefaultScheme
	}
	return &ObjectError{Path: memberPath(path, "tls"), Reason: fmt.Sprintf(`applies only to schemes "https" and "grpcs", got scheme %q; set "scheme": "https" (or "grpcs") or remove tls`, scheme)}
}

// CheckClientCertificate checks an inline client certificate as the Admin API receives
// it: the certificate and key parse and belong together, the certificate has not expired,
// and it may be used for client authentication. path is where u sits ("" for an upstream
// of its own, "upstream" inline). Errors name the field and never hold key material. A
// nil u, or one without client_cert, passes.
func (u *Upstream) CheckClientCertificate(path string) error {
	if u == nil || u.TLS == nil || u.TLS.ClientCert == "" {
		return nil
	}
	certField, keyField := memberPath(path, "tls.client_cert"), memberPath(path, "tls.client_key")
	return checkClientPair(certField, keyField, u.TLS.ClientCert, u.TLS.ClientKey, time.Now())
}

// checkClientPair is checkPair plus the key usage a client certificate needs.
func checkClientPair(certField, keyField, certPEM, keyPEM string, now time.Time) error {
	if err := checkPair(certField, keyField, certPEM, keyPEM, now); err != nil {
		return err
	}
	chain, err := ParseCertificates(certPEM)
	if err != nil {
		return &ObjectError{Path: certField, Reason: err.Error()} // checkPair parsed it already
	}
	if err := checkClientUsage(chain[0]); err != nil {
		return &ObjectError{Path: certField, Reason: err.Error()}
	}
	return nil
}

// checkClientUsage refuses a certificate whose extended key usage leaves out client
// authentication: servers (Go's, OpenSSL's) reject it as a client certificate, and the
// error would surface only as 502s.
func checkClientUsage(leaf *x509.Certificate) error {
	if len(leaf.ExtKeyUsage) == 0 && len(leaf.UnknownExtKeyUsage) == 0 {
		return nil // no restriction
	}
	if slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) || slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return nil
	}
	return fmt.Errorf("the certificate for %s does not allow client authentication (its extended key usage lacks clientAuth); issue one for TLS client authentication", describeCert(leaf))
}

// CheckClientSSL reports why s, found under id, cannot be an upstream's client_cert_id:
// it must be an ssl of type "client". A nil s is a dangling id. The message is APISIX's
// wording for a missing object.
func CheckClientSSL(id ID, s *SSL) error {
	if s == nil {
		return fmt.Errorf("failed to fetch ssl info by ssl id [%s], response code: 404", id)
	}
	if s.Type != SSLTypeClient {
		typ := s.Type
		if typ == "" {
			typ = SSLTypeServer
		}
		return fmt.Errorf(`ssl id [%s] is of type %q; tls.client_cert_id needs an ssl of type "client"`, id, typ)
	}
	return nil
}

// ResolveClientCerts copies into every upstream whose tls names client_cert_id (stored,
// and inline in services and routes) the certificate and key of that ssl object, so that
// compiling an upstream needs nothing else from the snapshot. An id that names no ssl of
// type client (deleted since) is left unresolved: ClientCertID without ClientCert, which
// the worker turns into 502s that say so. It changes snap's lists in place, and writes
// only where a resolution changed, with a fresh TLS block.
func (snap *Snapshot) ResolveClientCerts() {
	var byID map[ID]*SSL
	resolve := func(u *Upstream) {
		if u == nil || u.TLS == nil || u.TLS.ClientCertID == "" {
			return
		}
		if byID == nil {
			byID = make(map[ID]*SSL, len(snap.SSLs))
			for i := range snap.SSLs {
				byID[snap.SSLs[i].ID] = &snap.SSLs[i]
			}
		}
		resolveClientCert(u, byID[u.TLS.ClientCertID])
	}
	for i := range snap.Upstreams {
		resolve(&snap.Upstreams[i])
	}
	for i := range snap.Services {
		resolve(snap.Services[i].Upstream)
	}
	for i := range snap.Routes {
		resolve(snap.Routes[i].Upstream)
	}
}

// ResolveClientCert is ResolveClientCerts for one upstream, u, with snap's ssls: what a
// write of one route needs, without a pass over every route.
func (snap *Snapshot) ResolveClientCert(u *Upstream) {
	if u == nil || u.TLS == nil || u.TLS.ClientCertID == "" {
		return
	}
	for i := range snap.SSLs {
		if snap.SSLs[i].ID == u.TLS.ClientCertID {
			resolveClientCert(u, &snap.SSLs[i])
			return
		}
	}
	resolveClientCert(u, nil)
}

// resolveClientCert copies s's pair into u's tls, or clears it when s is no ssl of type
// client.
func resolveClientCert(u *Upstream, s *SSL) {
	cert, key := "", ""
	if CheckClientSSL(u.TLS.ClientCertID, s) == nil {
		cert, key = s.Cert, s.Key
	}
	if u.TLS.ClientCert == cert && u.TLS.ClientKey == key {
		return // as resolved before: snapshots sharing this upstream see no write
	}
	// A copy: the TLS block may be shared with the store's decoded object and with the
	// snapshot this one was made from.
	t := *u.TLS
	t.ClientCert, t.ClientKey = cert, key
	u.TLS = &t
}
