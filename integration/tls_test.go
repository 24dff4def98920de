package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gw/internal/testcert"
)

// tlsTestCert is a self-signed ECDSA certificate made for one test: no private key is
// committed.
type tlsTestCert struct {
	cert, key string
	serial    *big.Int
}

func newTLSTestCert(t *testing.T, names ...string) tlsTestCert {
	t.Helper()
	c := testcert.SelfSigned(t, testcert.Options{Names: names})
	return tlsTestCert{cert: c.CertPEM, key: c.KeyPEM, serial: c.Leaf.SerialNumber}
}

func (c tlsTestCert) sslBody(snis ...string) string {
	b, _ := json.Marshal(map[string]any{"cert": c.cert, "key": c.key, "snis": snis})
	return string(b)
}

// tlsGet opens a TLS connection to address with sni, sends GET path on it and returns the
// serial of the certificate served and the response. The handshake error, if any, is
// returned instead.
func tlsGet(t *testing.T, address, sni, path string, client *tls.Config) (*big.Int, *http.Response, string, error) {
	t.Helper()
	cfg := &tls.Config{}
	if client != nil {
		cfg = client.Clone()
	}
	// HTTP/1.1 alone: this speaks HTTP/1.1 on the connection (h2 is http2_test.go's).
	cfg.InsecureSkipVerify, cfg.ServerName, cfg.NextProtos = true, sni, []string{"http/1.1"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", address, cfg)
	if err != nil {
		return nil, nil, "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	serial := conn.ConnectionState().PeerCertificates[0].SerialNumber
	if conn.ConnectionState().NegotiatedProtocol != "http/1.1" {
		t.Errorf("ALPN negotiated %q, want http/1.1", conn.ConnectionState().NegotiatedProtocol)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, sni)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the response over TLS: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return serial, resp, string(body), nil
}

// TestTLSCertificatesFollowTheAdminAPI serves two tenants' certificates by SNI from two
// workers, replaces one and deletes it, with no reload.
func TestTLSCertificatesFollowTheAdminAPI(t *testing.T) {
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in := newInstance(t, fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\n", tlsAddr))
	// `gwctl start` names the TLS addresses apart from the plain ones.
	if out := in.start("--workers", "2"); !strings.Contains(out, " listen="+in.data+" tls="+tlsAddr+" ") {
		t.Errorf("gwctl start printed %q, want listen=%s tls=%s", out, in.data, tlsAddr)
	}
	up := startUpstream(t, "hello from upstream")
	in.putRoute("1", "/hello", up.addr)
	if status, body := in.adminCall("PUT", "/apisix/admin/routes/2",
		fmt.Sprintf(`{"uri":"/https-only","vars":[["scheme","==","https"]],"upstream":{"nodes":{%q:1}}}`, up.addr)); status != 201 {
		t.Fatalf("PUT route 2: %d %s", status, body)
	}

	tenantA := newTLSTestCert(t, "a.test")
	tenantB := newTLSTestCert(t, "*.b.test")
	for id, body := range map[string]string{"1": tenantA.sslBody("a.test"), "2": tenantB.sslBody("*.b.test")} {
		if status, resp := in.adminCall("PUT", "/apisix/admin/ssls/"+id, body); status != 201 {
			t.Fatalf("PUT ssls/%s: %d %s", id, status, resp)
		}
	}

	// expect checks, on fresh connections (which the two workers share), the certificate
	// each SNI gets; nil means the handshake must fail.
	expect := func(step string, want map[string]*big.Int) {
		t.Helper()
		for sni, serial := range want {
			for range 6 {
				got, resp, body, err := tlsGet(t, tlsAddr, sni, "/hello", nil)
				if serial == nil {
					if err == nil {
						t.Fatalf("%s: SNI %q got certificate %v, want a handshake failure", step, sni, got)
					}
					if !strings.Contains(err.Error(), "unrecognized name") {
						t.Fatalf("%s: SNI %q: %v, want the unrecognized_name alert", step, sni, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: SNI %q: handshake: %v", step, sni, err)
				}
				if got.Cmp(serial) != 0 {
					t.Fatalf("%s: SNI %q got certificate %v, want %v", step, sni, got, serial)
				}
				if resp.StatusCode != 200 || body != "hello from upstream" {
					t.Fatalf("%s: SNI %q: GET /hello = %d %q, want the upstream's 200", step, sni, resp.StatusCode, body)
				}
			}
		}
	}
	expect("two tenants", map[string]*big.Int{"a.test": tenantA.serial, "x.b.test": tenantB.serial,
		"unknown.test": nil, "a.b.b.test": nil})

	// $scheme is https on the TLS listener and http on the plain one.
	if _, resp, _, err := tlsGet(t, tlsAddr, "a.test", "/https-only", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("route with scheme == https over TLS: %v %v", resp, err)
	}
	if resp, _ := in.get("/https-only"); resp.StatusCode != 404 {
		t.Fatalf("route with scheme == https over plain HTTP: %d, want 404", resp.StatusCode)
	}

	// The Admin API never returns a private key, neither on a write nor on a read.
	renewed := newTLSTestCert(t, "a.test")
	status, body := in.adminCall("PUT", "/apisix/admin/ssls/1", renewed.sslBody("a.test"))
	if status != 200 {
		t.Fatalf("replacing ssls/1: %d %s", status, body)
	}
	_, one := in.adminCall("GET", "/apisix/admin/ssls/1", "")
	_, list := in.adminCall("GET", "/apisix/admin/ssls", "")
	for what, text := range map[string]string{"PUT answer": body, "GET": one, "list": list} {
		if strings.Contains(text, "PRIVATE KEY") {
			t.Errorf("the %s holds a private key: %s", what, text)
		}
	}
	if !strings.Contains(one, `"snis":["a.test"]`) || !strings.Contains(one, "BEGIN CERTIFICATE") {
		t.Errorf("GET ssls/1 lacks its snis or cert: %s", one)
	}

	// Another tenant cannot take a served name.
	if status, body := in.adminCall("PUT", "/apisix/admin/ssls/3", newTLSTestCert(t, "a.test").sslBody("a.test")); status != 400 ||
		!strings.Contains(body, `sni \"a.test\" is already served by ssl 1`) {
		t.Fatalf("PUT ssls/3 with a.test: %d %s, want 400 naming ssl 1", status, body)
	}

	expect("replaced", map[string]*big.Int{"a.test": renewed.serial, "x.b.test": tenantB.serial})

	if status, body := in.adminCall("DELETE", "/apisix/admin/ssls/1", ""); status != 200 {
		t.Fatalf("DELETE ssls/1: %d %s", status, body)
	}
	expect("deleted", map[string]*big.Int{"a.test": nil, "x.b.test": tenantB.serial})

	// TLS 1.1 and older are refused whatever the name.
	old := &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	if _, _, _, err := tlsGet(t, tlsAddr, "x.b.test", "/hello", old); err == nil {
		t.Fatal("a TLS 1.1 client completed a handshake")
	}
}

// TestTLSFallbackSNI serves the fallback certificate to a client that sends no SNI or an
// unknown one.
func TestTLSFallbackSNI(t *testing.T) {
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in := newInstance(t, fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\n  fallback_sni: default.test\n", tlsAddr))
	in.start("--workers", "1")
	up := startUpstream(t, "ok")
	in.putRoute("1", "/hello", up.addr)
	def := newTLSTestCert(t, "default.test")
	if status, body := in.adminCall("PUT", "/apisix/admin/ssls/1", def.sslBody("default.test")); status != 201 {
		t.Fatalf("PUT ssls/1: %d %s", status, body)
	}
	// ServerName an IP address: crypto/tls then sends no SNI at all.
	for _, sni := range []string{"127.0.0.1", "unknown.test"} {
		got, resp, body, err := tlsGet(t, tlsAddr, sni, "/hello", nil)
		if err != nil {
			t.Fatalf("SNI %q: %v", sni, err)
		}
		if got.Cmp(def.serial) != 0 || resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("SNI %q: certificate %v, %d %q; want the fallback and the upstream", sni, got, resp.StatusCode, body)
		}
	}
}

// ssl.ssl_trusted_certificate is read by `gwctl test` and `gwctl start`: a missing file,
// or one that holds anything but certificates, is reported with the key and the path, and
// nothing starts.
func TestTLSTrustedCertificateIsChecked(t *testing.T) {
	in := newInstance(t, "ssl:\n  ssl_trusted_certificate: conf/ca.pem\n")
	path := filepath.Join(in.prefix, "conf", "ca.pem")
	ca := newTLSTestCert(t, "ca.test")
	cases := []struct {
		name, file, want string // file "": absent; want "": accepted
	}{
		{"missing", "", "ssl.ssl_trusted_certificate: open " + path + ": no such file or directory"},
		{"a private key", ca.key, "ssl.ssl_trusted_certificate: " + path + `: failed to parse cert: PEM block 1 is "PRIVATE KEY"`},
		{"a certificate", ca.cert, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(path)
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.want == "" {
				if out, err := in.gwctl("test"); err != nil {
					t.Fatalf("gwctl test: %v\n%s", err, out)
				}
				in.start("--workers", "1")
				return
			}
			for _, verb := range []string{"test", "start"} {
				out, err := in.gwctl(verb)
				if err == nil || !strings.Contains(out, tc.want) {
					t.Errorf("gwctl %s: %v\n%s\nwant a failure saying %q", verb, err, out, tc.want)
				}
				if strings.Contains(out, "BEGIN") {
					t.Errorf("gwctl %s shows the file's content:\n%s", verb, out)
				}
			}
			if _, err := os.Stat(filepath.Join(in.prefix, "logs", "gwctl.pid")); err == nil {
				t.Fatalf("a master runs after gwctl start failed")
			}
		})
	}
}
