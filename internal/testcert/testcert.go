package testcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// KeyType is the kind of key a certificate certifies.
type KeyType int

const (
	// EC is an ECDSA P-256 key, the default: cheap to make.
	EC KeyType = iota
	// RSA is a 2048-bit RSA key, for tests that need both kinds.
	RSA
)

// Options describe a certificate. The zero value is valid but names nothing.
type Options struct {
	// Names are DNS names or IP literals; an IP literal goes into the IP addresses.
	Names []string
	// CommonName is the subject's name; empty means Names[0].
	CommonName string
	// Key picks the kind of a fresh key; Signer, when set, is certified instead (a
	// 1024-bit RSA key, a key a test wants to re-encode).
	Key    KeyType
	Signer crypto.Signer
	// Usage is the extended key usages (server, client, any); nil leaves them out.
	Usage []x509.ExtKeyUsage
	// NotBefore and NotAfter override the validity (an hour ago, a day from now), e.g.
	// to make an expired certificate.
	NotBefore, NotAfter time.Time
	// Serial overrides the random serial.
	Serial *big.Int
}

// Cert is a certificate and its key in the forms tests use.
type Cert struct {
	CertPEM, KeyPEM string
	Pair            tls.Certificate
	Leaf            *x509.Certificate
}

// CA is a self-signed certificate authority made for one test. It is safe for concurrent
// use: Issue only reads it.
type CA struct {
	Cert
	key crypto.Signer
}

// NewCA makes a CA called name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t, EC)
	tmpl := template(t, Options{CommonName: name})
	tmpl.KeyUsage = x509.KeyUsageCertSign
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	return &CA{Cert: create(t, tmpl, tmpl, key, key), key: key}
}

// Pool is a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Leaf)
	return p
}

// Issue makes a certificate signed by ca. It carries the digital-signature key usage a
// TLS leaf needs.
func (ca *CA) Issue(t testing.TB, o Options) Cert {
	t.Helper()
	key := o.Signer
	if key == nil {
		key = newKey(t, o.Key)
	}
	tmpl := template(t, o)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	return create(t, tmpl, ca.Leaf, key, ca.key)
}

// SelfSigned makes a certificate signed by its own key, with no key usage beyond o.Usage.
func SelfSigned(t testing.TB, o Options) Cert {
	t.Helper()
	key := o.Signer
	if key == nil {
		key = newKey(t, o.Key)
	}
	tmpl := template(t, o)
	return create(t, tmpl, tmpl, key, key)
}

func newKey(t testing.TB, kind KeyType) crypto.Signer {
	t.Helper()
	var key crypto.Signer
	var err error
	switch kind {
	case EC:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case RSA:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		t.Fatalf("testcert: unknown key type %d", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func template(t testing.TB, o Options) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: o.Serial,
		Subject:      pkix.Name{CommonName: o.CommonName},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		ExtKeyUsage:  o.Usage,
	}
	if tmpl.SerialNumber == nil {
		serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
		if err != nil {
			t.Fatal(err)
		}
		tmpl.SerialNumber = serial
	}
	if tmpl.Subject.CommonName == "" && len(o.Names) > 0 {
		tmpl.Subject.CommonName = o.Names[0]
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	for _, n := range o.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	return tmpl
}

func create(t testing.TB, tmpl, parent *x509.Certificate, key, signer crypto.Signer) Cert {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := Cert{
		CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		KeyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
	}
	if c.Pair, err = tls.X509KeyPair([]byte(c.CertPEM), []byte(c.KeyPEM)); err != nil {
		t.Fatal(err)
	}
	if c.Leaf = c.Pair.Leaf; c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(der); err != nil {
			t.Fatal(err)
		}
	}
	return c
}
