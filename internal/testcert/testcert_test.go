package testcert

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"math/big"
	"testing"
	"time"
)

func TestIssueVerifiesAgainstItsCA(t *testing.T) {
	ca, stranger := NewCA(t, "test CA"), NewCA(t, "stranger CA")
	server := ca.Issue(t, Options{Names: []string{"a.test", "127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	expired := ca.Issue(t, Options{Names: []string{"a.test"}, NotAfter: time.Now().Add(-time.Minute)})
	tests := []struct {
		name    string
		cert    Cert
		roots   *x509.CertPool
		dnsName string
		usage   x509.ExtKeyUsage
		wantErr bool
	}{
		{"dns name", server, ca.Pool(), "a.test", x509.ExtKeyUsageServerAuth, false},
		{"ip literal", server, ca.Pool(), "127.0.0.1", x509.ExtKeyUsageServerAuth, false},
		{"other name", server, ca.Pool(), "b.test", x509.ExtKeyUsageServerAuth, true},
		{"other CA", server, stranger.Pool(), "a.test", x509.ExtKeyUsageServerAuth, true},
		{"wrong usage", server, ca.Pool(), "a.test", x509.ExtKeyUsageClientAuth, true},
		{"expired", expired, ca.Pool(), "a.test", x509.ExtKeyUsageAny, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cert.Leaf.Verify(x509.VerifyOptions{Roots: tt.roots, DNSName: tt.dnsName, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
			if (err != nil) != tt.wantErr {
				t.Errorf("Verify: %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestSelfSignedOptions(t *testing.T) {
	ec := SelfSigned(t, Options{Names: []string{"a.test"}})
	if _, ok := ec.Pair.PrivateKey.(*ecdsa.PrivateKey); !ok || ec.Leaf.Subject.CommonName != "a.test" {
		t.Errorf("default: key %T, common name %q; want ECDSA and a.test", ec.Pair.PrivateKey, ec.Leaf.Subject.CommonName)
	}
	rsaCert := SelfSigned(t, Options{Key: RSA, CommonName: "client", Serial: big.NewInt(7)})
	if k, ok := rsaCert.Pair.PrivateKey.(*rsa.PrivateKey); !ok || k.N.BitLen() != 2048 {
		t.Errorf("RSA: key %T, want a 2048-bit RSA key", rsaCert.Pair.PrivateKey)
	}
	if rsaCert.Leaf.Subject.CommonName != "client" || rsaCert.Leaf.SerialNumber.Int64() != 7 || len(rsaCert.Leaf.DNSNames) != 0 {
		t.Errorf("RSA: common name %q, serial %v, names %v", rsaCert.Leaf.Subject.CommonName, rsaCert.Leaf.SerialNumber, rsaCert.Leaf.DNSNames)
	}
	if _, err := ec.Leaf.Verify(x509.VerifyOptions{Roots: poolOf(ec.Leaf), DNSName: "a.test"}); err != nil {
		t.Errorf("a self-signed certificate does not verify against itself: %v", err)
	}
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}
