package worker

import (
	"crypto/tls"
	"io"
	"math/big"
	"net"
	"os"
	"strings"
	"testing"

	"gw/conf"
	"gw/internal/errlog"
	"gw/internal/testcert"
)

// testCert is a self-signed certificate generated per run (no committed private keys).
type testCert struct {
	cert, key string
	serial    *big.Int
}

func newTestCert(t testing.TB, key testcert.KeyType, names ...string) testCert {
	t.Helper()
	c := testcert.SelfSigned(t, testcert.Options{Names: names, Key: key})
	return testCert{cert: c.CertPEM, key: c.KeyPEM, serial: c.Leaf.SerialNumber}
}

func newECCert(t testing.TB, names ...string) testCert {
	return newTestCert(t, testcert.EC, names...)
}

func newRSACert(t testing.TB, names ...string) testCert {
	return newTestCert(t, testcert.RSA, names...)
}

func testLog() *errlog.Logger { return errlog.New(os.Stderr, "test") }

// handshake runs one TLS handshake against store over loopback TCP (an in-memory pipe
// has no buffer, and TLS 1.3's session tickets would deadlock on it) and returns the
// serial of the certificate the server sent, or the client's error.
func handshake(t testing.TB, store *certStore, sni string, client *tls.Config) (*big.Int, error) {
	t.Helper()
	state, err := connect(t, store, sni, client)
	if err != nil {
		return nil, err
	}
	return state.PeerCertificates[0].SerialNumber, nil
}

// connect makes one TLS connection to store over loopback TCP and reads it to the end, so
// that a TLS 1.3 session ticket, sent after the handshake, reaches client's session cache;
// it returns the client's view of the connection, or the client's handshake error.
func connect(t testing.TB, store *certStore, sni string, client *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		serverSide, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		srv := tls.Server(serverSide, store.listener)
		err = srv.Handshake()
		srv.Close()
		done <- err
	}()
	clientSide, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer clientSide.Close()
	cfg := &tls.Config{InsecureSkipVerify: true, ServerName: sni}
	if client != nil {
		cfg = client.Clone()
		cfg.InsecureSkipVerify, cfg.ServerName = true, sni
	}
	c := tls.Client(clientSide, cfg)
	if err := c.Handshake(); err != nil {
		clientSide.Close()
		<-done
		return tls.ConnectionState{}, err
	}
	_, _ = io.Copy(io.Discard, c) // a session ticket, then the server's close_notify
	if err := <-done; err != nil {
		t.Fatalf("server side of the handshake: %v", err)
	}
	return c.ConnectionState(), nil
}

func TestCertStoreChoosesBySNI(t *testing.T) {
	exact := newECCert(t, "api.example.com")
	wild := newECCert(t, "*.example.com")
	other := newECCert(t, "other.test")
	off := newECCert(t, "off.test")
	zero := 0
	ssls := []conf.SSL{
		{ID: "exact", Cert: exact.cert, Key: exact.key, SNIs: []string{"api.example.com"}},
		{ID: "wild", Cert: wild.cert, Key: wild.key, SNIs: []string{"*.example.com"}},
		{ID: "other", Cert: other.cert, Key: other.key, SNI: "Other.Test."},
		{ID: "off", Cert: off.cert, Key: off.key, SNI: "off.test", Status: &zero},
		{ID: "client", Type: conf.SSLTypeClient, Cert: off.cert, Key: off.key},
	}
	tests := []struct {
		name     string
		fallback string
		sni      string
		want     *big.Int // nil: the handshake must fail
	}{
		{"exact", "", "api.example.com", exact.serial},
		{"exact beats wildcard", "", "api.example.com", exact.serial},
		{"wildcard", "", "www.example.com", wild.serial},
		{"client capitals", "", "WWW.Example.COM", wild.serial},
		{"stored capitals and dot", "", "other.test", other.serial},
		{"wildcard covers one label only", "", "a.b.example.com", nil},
		{"wildcard does not cover the bare name", "", "example.com", nil},
		{"unknown", "", "unknown.test", nil},
		{"no sni", "", "", nil},
		{"status 0 not served", "", "off.test", nil},
		{"unknown gets fallback", "other.test", "unknown.test", other.serial},
		{"no sni gets fallback", "other.test", "", other.serial},
		{"fallback through a wildcard", "fallback.example.com", "", wild.serial},
		{"fallback naming nothing", "nothing.test", "unknown.test", nil},
		{"fallback does not override a match", "other.test", "api.example.com", exact.serial},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newCertStore(tt.fallback, testLog())
			table, pairs, leftOut := store.compile(ssls)
			if leftOut != nil {
				t.Fatal(leftOut)
			}
			store.commit(table, pairs)
			// An IP-address ServerName is not sent as SNI, which is how "no sni" is made.
			sni := tt.sni
			if sni == "" {
				sni = "127.0.0.1"
			}
			got, err := handshake(t, store, sni, nil)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("handshake for %q succeeded with certificate %v, want a failure", tt.sni, got)
				}
				if !strings.Contains(err.Error(), "unrecognized name") {
					t.Errorf("handshake error %q, want the unrecognized_name alert", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("handshake for %q: %v", tt.sni, err)
			}
			if got.Cmp(tt.want) != 0 {
				t.Errorf("SNI %q got certificate %v, want %v", tt.sni, got, tt.want)
			}
		})
	}
}

func TestCertStoreVersions(t *testing.T) {
	c := newECCert(t, "a.test")
	store := newCertStore("", testLog())
	table, pairs, leftOut := store.compile([]conf.SSL{
		{ID: "any", Cert: c.cert, Key: c.key, SNI: "a.test"},
		{ID: "13", Cert: c.cert, Key: c.key, SNI: "b.test", SSLProtocols: []string{conf.TLSv13}},
		{ID: "12", Cert: c.cert, Key: c.key, SNI: "c.test", SSLProtocols: []string{conf.TLSv12}},
	})
	if leftOut != nil {
		t.Fatal(leftOut)
	}
	store.commit(table, pairs)
	tests := []struct {
		sni      string
		min, max uint16
		wantErr  bool
	}{
		{"a.test", tls.VersionTLS10, tls.VersionTLS11, true}, // TLS 1.1 refused
		{"a.test", tls.VersionTLS12, tls.VersionTLS12, false},
		{"a.test", tls.VersionTLS13, tls.VersionTLS13, false},
		{"b.test", tls.VersionTLS12, tls.VersionTLS12, true},
		{"b.test", tls.VersionTLS12, tls.VersionTLS13, false},
		{"c.test", tls.VersionTLS13, tls.VersionTLS13, true},
		{"c.test", tls.VersionTLS12, tls.VersionTLS13, false},
	}
	for _, tt := range tests {
		_, err := handshake(t, store, tt.sni, &tls.Config{MinVersion: tt.min, MaxVersion: tt.max})
		if (err != nil) != tt.wantErr {
			t.Errorf("%s with TLS %x-%x: err %v, want failure %v", tt.sni, tt.min, tt.max, err, tt.wantErr)
		}
	}
}

func TestCertStoreRefusesWeakCiphers(t *testing.T) {
	c := newECCert(t, "a.test")
	store := newCertStore("", testLog())
	table, pairs, _ := store.compile([]conf.SSL{{ID: "1", Cert: c.cert, Key: c.key, SNI: "a.test"}})
	store.commit(table, pairs)
	weak := &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}
	if _, err := handshake(t, store, "a.test", weak); err == nil {
		t.Fatal("a CBC-only TLS 1.2 client completed a handshake")
	}
}

func TestCertStoreDualCertificates(t *testing.T) {
	ec := newECCert(t, "dual.test")
	rsaCert := newRSACert(t, "dual.test")
	store := newCertStore("", testLog())
	table, pairs, leftOut := store.compile([]conf.SSL{{ID: "1", Cert: ec.cert, Key: ec.key,
		Certs: []string{rsaCert.cert}, Keys: []string{rsaCert.key}, SNI: "dual.test"}})
	if leftOut != nil {
		t.Fatal(leftOut)
	}
	store.commit(table, pairs)
	// A TLS 1.2 client that signs only with RSA gets the RSA certificate.
	rsaOnly := &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}
	if got, err := handshake(t, store, "dual.test", rsaOnly); err != nil || got.Cmp(rsaCert.serial) != 0 {
		t.Errorf("RSA-only client: got %v, %v; want the RSA certificate", got, err)
	}
	if got, err := handshake(t, store, "dual.test", nil); err != nil || got.Cmp(ec.serial) != 0 {
		t.Errorf("modern client: got %v, %v; want the ECDSA certificate", got, err)
	}
}

func TestCertStoreCompileFailureKeepsTable(t *testing.T) {
	good := newECCert(t, "a.test")
	other := newECCert(t, "b.test")
	store := newCertStore("", testLog())
	table, pairs, leftOut := store.compile([]conf.SSL{{ID: "1", Cert: good.cert, Key: good.key, SNI: "a.test"}})
	if leftOut != nil {
		t.Fatal(leftOut)
	}
	store.commit(table, pairs)
	_, _, leftOut = store.compile([]conf.SSL{{ID: "2", Cert: good.cert, Key: other.key, SNI: "a.test"}})
	if len(leftOut) != 1 || leftOut[0].Key() != "ssls/2" || !strings.Contains(leftOut[0].Reason, "cert:") {
		t.Fatalf("compile of a mismatched pair left out %v, want ssls/2 with its cert named", leftOut)
	}
	if strings.Contains(leftOut[0].Reason, keyText(other.key)) {
		t.Fatalf("reason %q holds key material", leftOut[0].Reason)
	}
	if got, err := handshake(t, store, "a.test", nil); err != nil || got.Cmp(good.serial) != 0 {
		t.Fatalf("after a failed compile: %v, %v; want the old certificate", got, err)
	}
}

func keyText(pemText string) string {
	lines := strings.Split(strings.TrimSpace(pemText), "\n")
	return lines[1]
}

func TestCertStoreReusesParsedPairs(t *testing.T) {
	a := newECCert(t, "a.test")
	b := newECCert(t, "b.test")
	store := newCertStore("", testLog())
	ssls := []conf.SSL{{ID: "a", Cert: a.cert, Key: a.key, SNI: "a.test"}}
	table, pairs, _ := store.compile(ssls)
	store.commit(table, pairs)
	first := table.exact["a.test"].Certificates[0].PrivateKey

	ssls = append(ssls, conf.SSL{ID: "b", Cert: b.cert, Key: b.key, SNI: "b.test"})
	table, pairs, _ = store.compile(ssls)
	store.commit(table, pairs)
	if table.exact["a.test"].Certificates[0].PrivateKey != first {
		t.Error("an unchanged ssl's key was parsed again")
	}
	if len(store.pairs) != 2 {
		t.Errorf("cache holds %d pairs, want 2", len(store.pairs))
	}
	table, pairs, _ = store.compile(ssls[1:])
	store.commit(table, pairs)
	if len(store.pairs) != 1 {
		t.Errorf("cache holds %d pairs after a delete, want 1 (a deleted key must not linger)", len(store.pairs))
	}
}

func TestCertStoreDuplicateNameKeepsOlder(t *testing.T) {
	older := newECCert(t, "a.test")
	newer := newECCert(t, "a.test")
	store := newCertStore("", testLog())
	table, pairs, leftOut := store.compile([]conf.SSL{
		{ID: "old", Cert: older.cert, Key: older.key, SNI: "a.test"},
		{ID: "new", Cert: newer.cert, Key: newer.key, SNI: "a.test"},
	})
	if leftOut != nil {
		t.Fatal(leftOut)
	}
	store.commit(table, pairs)
	if got, err := handshake(t, store, "a.test", nil); err != nil || got.Cmp(older.serial) != 0 {
		t.Errorf("got %v, %v; want the older ssl's certificate", got, err)
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	c := newECCert(t, "a.test")
	store := newCertStore("", testLog())
	table, _, _ := store.compile([]conf.SSL{{ID: "1", Cert: c.cert, Key: c.key, SNIs: []string{"a.test", "*.b.test"}}})
	hello := &tls.ClientHelloInfo{ServerName: "x.b.test"}
	store.commit(table, nil)
	if n := testing.AllocsPerRun(100, func() { _, _ = store.configFor(hello) }); n != 0 {
		t.Errorf("configFor allocates %v times per handshake", n)
	}
}

func TestTLSVersions(t *testing.T) {
	tests := []struct {
		protocols []string
		min, max  uint16
	}{
		{[]string{conf.TLSv12}, tls.VersionTLS12, tls.VersionTLS12},
		{[]string{conf.TLSv13}, tls.VersionTLS13, tls.VersionTLS13},
		{[]string{conf.TLSv13, conf.TLSv12}, tls.VersionTLS12, tls.VersionTLS13},
	}
	for _, tt := range tests {
		lo, hi := tlsVersions(tt.protocols)
		if lo != tt.min || hi != tt.max {
			t.Errorf("tlsVersions(%v) = %x, %x; want %x, %x", tt.protocols, lo, hi, tt.min, tt.max)
		}
	}
}
