package conf

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// SSL is APISIX's ssls object: a certificate (with its chain) and private key, served to
// TLS clients that ask for one of its SNIs. Certs and Keys hold extra pairs for the same
// names (an ECDSA and an RSA certificate, say); the handshake picks the one the client
// supports. Type "client" marks a certificate for upstream mTLS, never served.
//
// Key and Keys are private keys: never log an SSL with %+v of its fields; String and
// GoString leave them out.
type SSL struct {
	ID     ID                `json:"id,omitempty"`
	Desc   string            `json:"desc,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Type is "server" (the default when empty) or "client".
	Type  string   `json:"type,omitempty"`
	Cert  string   `json:"cert"`
	Key   string   `json:"key"`
	SNI   string   `json:"sni,omitempty"`
	SNIs  []string `json:"snis,omitempty"`
	Certs []string `json:"certs,omitempty"`
	Keys  []string `json:"keys,omitempty"`
	// Status is 1 (served, the default) or 0 (kept but not served).
	Status *int `json:"status,omitempty"`
	// SSLProtocols narrows the TLS versions for these names: "TLSv1.2", "TLSv1.3".
	SSLProtocols []string `json:"ssl_protocols,omitempty"`
	CreateTime   int64    `json:"create_time,omitempty"`
	UpdateTime   int64    `json:"update_time,omitempty"`
}

// The ssl types APISIX knows.
const (
	SSLTypeServer = "server"
	SSLTypeClient = "client"
)

// The TLS versions an ssl's ssl_protocols may name. APISIX also allows TLSv1.1; gw does
// not speak it at all.
const (
	TLSv12 = "TLSv1.2"
	TLSv13 = "TLSv1.3"
)

// maxPEMLength is APISIX's maxLength for cert and key (64 KiB).
const maxPEMLength = 64 << 10

// minRSABits refuses keys that no current browser or CA accepts.
const minRSABits = 2048

// Serves reports whether the SSL's certificates are offered on the TLS listener: a server
// certificate with status unset or 1.
func (s *SSL) Serves() bool {
	return (s.Type == "" || s.Type == SSLTypeServer) && (s.Status == nil || *s.Status == 1)
}

// Names returns the SNIs the SSL serves, lower-cased and without a trailing dot, as a TLS
// client sends them.
func (s *SSL) Names() []string {
	names := s.SNIs
	if s.SNI != "" {
		names = []string{s.SNI}
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = NormalizeSNI(n)
	}
	return out
}

// NormalizeSNI lower-cases a host name and drops a trailing dot.
func NormalizeSNI(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// String names the SSL without its private keys, so that logging one leaks nothing.
func (s SSL) String() string {
	return fmt.Sprintf("ssl %s (snis %v)", s.ID, s.Names())
}

// GoString is String, for %#v.
func (s SSL) GoString() string { return s.String() }

// sslFields is APISIX's ssl schema (schema_def.lua _M.ssl): additionalProperties is
// false, so any other field is rejected. Readers of cert and key never put the value in a
// message: a private key must not reach an error body or a log.
var sslFields = fieldDecoders[SSL]{
	"id":            into(func(s *SSL) *ID { return &s.ID }, parseID),
	"desc":          into(func(s *SSL) *string { return &s.Desc }, readDesc),
	"labels":        intoAt(func(s *SSL) *map[string]string { return &s.Labels }, decodeLabels),
	"type":          into(func(s *SSL) *string { return &s.Type }, readSSLType),
	"cert":          into(func(s *SSL) *string { return &s.Cert }, readSSLPEM),
	"key":           into(func(s *SSL) *string { return &s.Key }, readSSLPEM),
	"sni":           into(func(s *SSL) *string { return &s.SNI }, readSNI),
	"snis":          into(func(s *SSL) *[]string { return &s.SNIs }, readSNIs),
	"certs":         into(func(s *SSL) *[]string { return &s.Certs }, readSSLPEMs),
	"keys":          into(func(s *SSL) *[]string { return &s.Keys }, readSSLPEMs),
	"status":        into(func(s *SSL) **int { return &s.Status }, optional(readStatus)),
	"ssl_protocols": into(func(s *SSL) *[]string { return &s.SSLProtocols }, readSSLProtocols),
	"create_time":   into(func(s *SSL) *int64 { return &s.CreateTime }, asInteger),
	"update_time":   into(func(s *SSL) *int64 { return &s.UpdateTime }, asInteger),

	// APISIX has it and gw does not yet: client certificate verification (mTLS).
	"client": nil,
}

// DecodeSSL decodes and validates one ssl as the Admin API received it: the fields as
// APISIX's schema has them, then the certificates and keys themselves, with their secret
// references ($env://NAME) resolved by lookup (the master passes os.LookupEnv). Every
// certificate must parse, every key must parse and belong to its certificate, and RSA
// keys must have at least 2048 bits. An expired certificate passes, as in APISIX and
// nginx, which serve it: the master warns of it and exports its expiry instead. A
// reference without a value is refused, naming the field and the variable. Errors never
// hold key material. The SSL returned keeps its references as written.
func DecodeSSL(data []byte, lookup func(string) (string, bool)) (*SSL, error) {
	s, err := DecodeStoredSSL(data)
	if err != nil {
		return nil, err
	}
	resolved, err := s.ResolveSecrets(lookup)
	if err != nil {
		return nil, err
	}
	if err := resolved.checkPairs(); err != nil {
		return nil, err
	}
	return s, nil
}

// ResolveSecrets returns s with each secret reference in cert, key, certs and keys
// replaced by its value from lookup, or s itself when it holds none. s is not modified.
// A reference without a value (unset, empty, or without the member named) is an error
// naming the field and the reference; the SSL returned with it has every other reference
// resolved and that one as written (UnresolvedRef names it). A nil lookup has no values.
func (s *SSL) ResolveSecrets(lookup func(string) (string, bool)) (*SSL, error) {
	if !s.holdsSecretRef() {
		return s, nil
	}
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	out := *s
	out.Certs, out.Keys = slices.Clone(s.Certs), slices.Clone(s.Keys)
	var first error
	resolve := func(field, item string, text *string) {
		value, err := resolvePEM(field, item, *text, lookup)
		if err != nil {
			first = cmp.Or(first, err)
			return
		}
		*text = value
	}
	resolve("cert", "", &out.Cert)
	resolve("key", "", &out.Key)
	for i := range out.Certs {
		resolve("certs", fmt.Sprintf("item %d: ", i+1), &out.Certs[i])
	}
	for i := range out.Keys {
		resolve("keys", fmt.Sprintf("item %d: ", i+1), &out.Keys[i])
	}
	return &out, first
}

// UnresolvedRef names the first of s's fields that still holds a secret reference, which
// a worker is given only when the master's environment had no value for it; nil when
// none does.
func (s *SSL) UnresolvedRef() error {
	check := func(field, text string) error {
		if IsSecretRef(text) {
			return fmt.Errorf("%s: %s has no value in the master's environment", field, text)
		}
		return nil
	}
	if err := check("cert", s.Cert); err != nil {
		return err
	}
	if err := check("key", s.Key); err != nil {
		return err
	}
	for i := range s.Certs {
		if err := check(fmt.Sprintf("certs item %d", i+1), s.Certs[i]); err != nil {
			return err
		}
	}
	for i := range s.Keys {
		if err := check(fmt.Sprintf("keys item %d", i+1), s.Keys[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *SSL) holdsSecretRef() bool {
	return IsSecretRef(s.Cert) || IsSecretRef(s.Key) ||
		slices.ContainsFunc(s.Certs, IsSecretRef) || slices.ContainsFunc(s.Keys, IsSecretRef)
}

// resolvePEM is text's value when it is a secret reference, text itself otherwise.
func resolvePEM(field, item, text string, lookup func(string) (string, bool)) (string, error) {
	ref, isRef, err := ParseSecretRef(text)
	switch {
	case !isRef:
		return text, nil
	case err != nil:
		return "", &ObjectError{Path: field, Reason: item + err.Error()}
	}
	value, ok := ref.Resolve(lookup)
	if !ok {
		return "", &ObjectError{Path: field, Reason: fmt.Sprintf("%s%s has no value in the gateway's environment "+
			"(unset, empty, or without that member); set it where the master starts, or give the PEM text", item, ref)}
	}
	return value, nil
}

// Expiry is when an ssl's certificates stop being valid: for each pair, the leaf's
// NotAfter, in the order cert, then certs. A certificate that does not parse has the
// zero time. s must hold no unresolved secret reference (ResolveSecrets).
func (s *SSL) Expiry() []time.Time {
	out := make([]time.Time, 0, 1+len(s.Certs))
	for _, text := range append([]string{s.Cert}, s.Certs...) {
		var notAfter time.Time
		if chain, err := ParseCertificates(text); err == nil {
			notAfter = chain[0].NotAfter
		}
		out = append(out, notAfter)
	}
	return out
}

// DecodeStoredSSL decodes an ssl and checks its fields, but not the certificates against
// their keys: that costs a key parse per object, and a stored object already passed
// DecodeSSL. Workers parse the pairs anyway when they build their certificate table. A
// certificate that expires while stored keeps being served, as nginx would.
func DecodeStoredSSL(data []byte) (*SSL, error) {
	raw, err := document(data)
	if err != nil {
		return nil, err
	}
	var s SSL
	members, err := sslFields.decode(&s, "", raw)
	if err != nil {
		return nil, err
	}
	if err := require(members, "", "cert", "key"); err != nil {
		return nil, err
	}
	if len(s.Certs) != len(s.Keys) {
		return nil, &ObjectError{Path: "keys", Reason: fmt.Sprintf("mismatched number of certs and keys: %d certs, %d keys", len(s.Certs), len(s.Keys))}
	}
	if s.Type == SSLTypeClient {
		return &s, nil
	}
	_, hasSNI := members["sni"]
	_, hasSNIs := members["snis"]
	switch {
	case hasSNI && hasSNIs:
		return nil, &ObjectError{Path: "snis", Reason: `give either "sni" or "snis", not both`}
	case !hasSNI && !hasSNIs:
		return nil, &ObjectError{Path: "snis", Reason: `is required: the host names this certificate is served for, e.g. ["example.com", "*.example.com"]`}
	}
	return &s, nil
}

// checkPairs parses every certificate and key and checks that they belong together.
func (s *SSL) checkPairs() error {
	if err := checkPair("cert", "key", s.Cert, s.Key, time.Time{}); err != nil {
		return err
	}
	for i := range s.Certs {
		item := fmt.Sprintf("item %d", i+1)
		if err := checkPair("certs", "keys", s.Certs[i], s.Keys[i], time.Time{}); err != nil {
			oe := err.(*ObjectError)
			oe.Reason = item + ": " + oe.Reason
			return oe
		}
	}
	return nil
}

// checkPair checks one certificate chain and its private key; certField and keyField
// name them in messages. A certificate that has expired by refuseExpiredAt is refused;
// the zero time lets expired ones pass (an ssl's: nginx serves them).
func checkPair(certField, keyField, certPEM, keyPEM string, refuseExpiredAt time.Time) error {
	chain, err := ParseCertificates(certPEM)
	if err != nil {
		return &ObjectError{Path: certField, Reason: err.Error()}
	}
	leaf := chain[0]
	if !refuseExpiredAt.IsZero() && refuseExpiredAt.After(leaf.NotAfter) {
		return &ObjectError{Path: certField, Reason: fmt.Sprintf("the certificate for %s expired on %s; upload its renewal",
			describeCert(leaf), leaf.NotAfter.UTC().Format(time.RFC3339))}
	}
	if pub, ok := leaf.PublicKey.(*rsa.PublicKey); ok && pub.N.BitLen() < minRSABits {
		return &ObjectError{Path: certField, Reason: fmt.Sprintf("the certificate for %s has a %d-bit RSA key; use at least %d bits or ECDSA",
			describeCert(leaf), pub.N.BitLen(), minRSABits)}
	}
	if err := checkKeyPEM(keyPEM); err != nil {
		return &ObjectError{Path: keyField, Reason: err.Error()}
	}
	if _, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM)); err != nil {
		// crypto/tls words its errors without key material; the common one gets ours.
		reason := "failed to parse key: " + strings.TrimPrefix(err.Error(), "tls: ")
		if strings.Contains(err.Error(), "does not match") {
			reason = fmt.Sprintf("does not match the certificate in %q (%s, %s key); the first certificate there must be the one this key belongs to",
				certField, describeCert(leaf), keyAlgorithm(leaf))
		}
		return &ObjectError{Path: keyField, Reason: reason}
	}
	return nil
}

// ParseCertificates parses a PEM chain: one or more CERTIFICATE blocks, the leaf first.
// Text between blocks (openssl's "subject=" lines) is ignored.
func ParseCertificates(text string) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	rest := []byte(text)
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			hint := ""
			if strings.HasSuffix(block.Type, "PRIVATE KEY") {
				hint = `; a private key belongs in "key"`
			}
			return nil, fmt.Errorf("failed to parse cert: PEM block %d is %q, expected CERTIFICATE%s", n, block.Type, hint)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("failed to parse cert: PEM block %d: %v", n, err)
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 && IsSecretRef(text) {
		return nil, fmt.Errorf("failed to parse cert: %q is a secret reference the master did not resolve", text)
	}
	if len(chain) == 0 {
		return nil, errors.New("failed to parse cert: no PEM CERTIFICATE block found (expected -----BEGIN CERTIFICATE-----)")
	}
	return chain, nil
}

// checkKeyPEM explains what is wrong with a private key's PEM, in words that hold no key
// material; a key that passes may still not match its certificate.
func checkKeyPEM(text string) error {
	block, _ := pem.Decode([]byte(text))
	switch {
	case block == nil:
		return errors.New("failed to parse key: no PEM block found (expected -----BEGIN PRIVATE KEY-----)")
	case block.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED"):
		return errors.New("failed to parse key: the key is encrypted with a passphrase; store it decrypted (openssl pkey -in key.pem -out plain.pem)")
	case !strings.HasSuffix(block.Type, "PRIVATE KEY"):
		return fmt.Errorf("failed to parse key: the PEM block is %q, expected a PRIVATE KEY", block.Type)
	}
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		_, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		_, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		_, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return fmt.Errorf("failed to parse key: %s: %v", block.Type, err)
	}
	return nil
}

func describeCert(c *x509.Certificate) string {
	if len(c.DNSNames) > 0 {
		return fmt.Sprintf("%q", c.DNSNames)
	}
	if c.Subject.CommonName != "" {
		return fmt.Sprintf("CN=%s", c.Subject.CommonName)
	}
	return "serial " + c.SerialNumber.String()
}

func keyAlgorithm(c *x509.Certificate) string {
	switch c.PublicKey.(type) {
	case *rsa.PublicKey:
		return "RSA"
	case *ecdsa.PublicKey:
		return "ECDSA"
	case ed25519.PublicKey:
		return "Ed25519"
	}
	return c.PublicKeyAlgorithm.String()
}

// readPEM reads a cert or key where no secret reference is resolved (an upstream's
// client certificate): readPEMText, refusing references.
func readPEM(raw json.RawMessage) (string, error) {
	s, err := readPEMText(raw)
	if err == nil && IsSecretRef(s) {
		return "", errors.New("secret references ($secret://, $env://) are not supported here; give the PEM text")
	}
	return s, err
}

// readSSLPEM reads an ssl's cert or key: readPEMText, or an $env:// reference, which
// DecodeSSL resolves before it checks the pair.
func readSSLPEM(raw json.RawMessage) (string, error) {
	s, err := readPEMText(raw)
	if err != nil {
		return "", err
	}
	if _, isRef, err := ParseSecretRef(s); isRef && err != nil {
		return "", err
	}
	return s, nil
}

// readPEMText reads a cert or key: a string of at most 64 KiB. What is wrong with the PEM
// is checkPair's to say, with the field's partner at hand.
func readPEMText(raw json.RawMessage) (string, error) {
	if jsonKind(raw) != "string" {
		return "", wrongType("string", raw) // not a string, so nothing secret to show
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	switch {
	case s == "":
		return "", errors.New("must not be empty")
	case len(s) > maxPEMLength:
		return "", fmt.Errorf("must be at most %d bytes, got %d", maxPEMLength, len(s))
	}
	return s, nil
}

// readSSLPEMs reads an ssl's certs or keys: an array of readSSLPEM.
func readSSLPEMs(raw json.RawMessage) ([]string, error) {
	if jsonKind(raw) != "array" {
		return nil, wrongType("array", raw)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	list := make([]string, len(items))
	for i, item := range items {
		s, err := readSSLPEM(item)
		if err != nil {
			return nil, fmt.Errorf("failed to validate item %d: %w", i+1, err)
		}
		list[i] = s
	}
	return list, nil
}

func readSSLType(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error {
		if s != SSLTypeServer && s != SSLTypeClient {
			return fmt.Errorf("must be %q or %q, got %q", SSLTypeServer, SSLTypeClient, s)
		}
		return nil
	})
}

func readSSLProtocols(raw json.RawMessage) ([]string, error) {
	return stringList(raw, 1, func(s string) error {
		switch s {
		case TLSv12, TLSv13:
			return nil
		case "TLSv1.1", "TLSv1", "TLSv1.0", "SSLv3":
			return fmt.Errorf("%q is not supported: gw speaks only %s and %s", s, TLSv12, TLSv13)
		}
		return fmt.Errorf("must be %q or %q, got %q", TLSv12, TLSv13, s)
	})
}

func readSNI(raw json.RawMessage) (string, error) {
	return checkedString(raw, CheckSNI)
}

func readSNIs(raw json.RawMessage) ([]string, error) {
	names, err := stringList(raw, 1, CheckSNI)
	if err != nil {
		return nil, err
	}
	firstAt := make(map[string]int, len(names))
	for i, n := range names {
		norm := NormalizeSNI(n)
		if j, seen := firstAt[norm]; seen {
			return nil, fmt.Errorf("items %d (%q) and %d (%q) are the same host name", j+1, names[j], i+1, n)
		}
		firstAt[norm] = i
	}
	return names, nil
}

// maxHostLength is DNS's limit on a name's text form.
const maxHostLength = 253

// CheckSNI accepts a host name as TLS clients send it in SNI, or one whose whole first
// label is "*" (*.example.com: one label, not more, as in APISIX and RFC 6125). Case does
// not matter; one trailing dot is allowed.
func CheckSNI(name string) error {
	host := strings.TrimSuffix(name, ".")
	wildcard := strings.HasPrefix(host, "*.")
	if wildcard {
		host = host[2:]
	}
	switch {
	case name == "*":
		return errors.New(`a lone "*" would take every name, other tenants' too; to serve one certificate to unknown names set ssl.fallback_sni in config.yaml`)
	case host == "" || len(host) > maxHostLength:
		return fmt.Errorf("must be a host name of 1-%d characters, got %q", maxHostLength, name)
	case strings.Contains(host, "*"):
		return fmt.Errorf(`only a whole first label may be a wildcard (*.example.com), got %q`, name)
	}
	if addr, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return fmt.Errorf("must be a host name, got the IP address %q: clients connecting by IP send no SNI and get ssl.fallback_sni", addr)
	}
	labels := strings.Split(host, ".")
	if wildcard && len(labels) < 2 {
		return fmt.Errorf("a wildcard must stand for one label of a name with at least two more (*.example.com), got %q", name)
	}
	for _, label := range labels {
		if !hostLabel(label) {
			return fmt.Errorf("must be a host name: labels of 1-63 letters, digits and inner hyphens, separated by dots; got %q", name)
		}
	}
	return nil
}

func hostLabel(label string) bool {
	if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
		return false
	}
	for i := 0; i < len(label); i++ {
		if !isAlnum(label[i]) && label[i] != '-' {
			return false
		}
	}
	return true
}
