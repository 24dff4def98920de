package integration

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gw/internal/testcert"
)

// upstreamCA is a testcert.CA with the short call these tests make.
type upstreamCA struct{ *testcert.CA }

func newUpstreamCA(t *testing.T, name string) upstreamCA {
	return upstreamCA{testcert.NewCA(t, name)}
}

// issue returns a certificate for name (an IP address or a host name) and its key, PEM.
func (ca upstreamCA) issue(t *testing.T, usage x509.ExtKeyUsage, name string) (certPEM, keyPEM string) {
	t.Helper()
	c := ca.Issue(t, testcert.Options{Names: []string{name}, Usage: []x509.ExtKeyUsage{usage}})
	return c.CertPEM, c.KeyPEM
}

// startTLSUpstream serves HTTPS on loopback with config, answering with body and the
// client certificate's name.
func startTLSUpstream(t *testing.T, body string, config *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", config)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			client := "-"
			if len(r.TLS.PeerCertificates) > 0 {
				client = r.TLS.PeerCertificates[0].Subject.CommonName
			}
			fmt.Fprintf(w, "%s client=%s", body, client)
		}),
		ErrorLog: discardErrors, // the refused handshakes are the test's doing
	}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func serverPair(t *testing.T, certPEM, keyPEM string) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// TestHTTPSUpstreams runs https upstreams through the real binary: verified against the
// CA that ssl.ssl_trusted_certificate names, refused when untrusted unless tls.verify is
// false, and with client certificates for a node that requires one.
func TestHTTPSUpstreams(t *testing.T) {
	ca, rogue, clientCA := newUpstreamCA(t, "upstream CA"), newUpstreamCA(t, "rogue CA"), newUpstreamCA(t, "client CA")
	trustedCert, trustedKey := ca.issue(t, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	rogueCert, rogueKey := rogue.issue(t, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	clientCert, clientKey := clientCA.issue(t, x509.ExtKeyUsageClientAuth, "gw-client")

	trusted := startTLSUpstream(t, "trusted", &tls.Config{Certificates: []tls.Certificate{serverPair(t, trustedCert, trustedKey)}})
	untrusted := startTLSUpstream(t, "untrusted", &tls.Config{Certificates: []tls.Certificate{serverPair(t, rogueCert, rogueKey)}})
	mutual := startTLSUpstream(t, "mutual", &tls.Config{
		Certificates: []tls.Certificate{serverPair(t, trustedCert, trustedKey)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCA.Pool(),
	})

	in := newInstance(t, "worker_processes: 1\nssl:\n  ssl_trusted_certificate: conf/upstream-ca.pem\n")
	if err := os.WriteFile(filepath.Join(in.prefix, "conf", "upstream-ca.pem"), []byte(ca.CertPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	in.start()

	putRoute := func(id string, upstream map[string]any) (int, string) {
		upstream["scheme"] = "https"
		upstream["pass_host"] = "node" // the name checked is then the node's address
		b, _ := json.Marshal(map[string]any{"uri": "/" + id, "upstream": upstream})
		return in.adminCall("PUT", "/apisix/admin/routes/"+id, string(b))
	}
	nodes := func(addr string) map[string]int { return map[string]int{addr: 1} }
	clientTLS := map[string]any{"client_cert": clientCert, "client_key": clientKey}
	for id, up := range map[string]map[string]any{
		"trusted":    {"nodes": nodes(trusted)},
		"untrusted":  {"nodes": nodes(untrusted)},
		"unverified": {"nodes": nodes(untrusted), "tls": map[string]any{"verify": false}},
		"mtls":       {"nodes": nodes(mutual), "tls": clientTLS},
		"mtls-none":  {"nodes": nodes(mutual)},
		"mtls-ssl":   {"nodes": nodes(mutual), "tls": map[string]any{"client_cert_id": "client-1"}},
	} {
		if id == "mtls-ssl" {
			// The Admin API refuses a client_cert_id that names no ssl, as a dangling
			// upstream_id; then the client ssl is stored and the route accepted.
			if status, body := putRoute(id, up); status != 400 || !strings.Contains(body, "failed to fetch ssl info by ssl id [client-1]") {
				t.Fatalf("route with a dangling client_cert_id: %d %s, want 400", status, body)
			}
			ssl, _ := json.Marshal(map[string]any{"type": "client", "cert": clientCert, "key": clientKey})
			if status, body := in.adminCall("PUT", "/apisix/admin/ssls/client-1", string(ssl)); status != 200 && status != 201 {
				t.Fatalf("PUT client ssl: %d %s", status, body)
			}
		}
		if status, body := putRoute(id, up); status != 200 && status != 201 {
			t.Fatalf("PUT route %s: %d %s", id, status, body)
		}
	}

	for _, tt := range []struct {
		path     string
		status   int
		body     string // substring
		errorLog string // substring of error.log, "" for none
	}{
		{"/trusted", 200, "trusted client=-", ""},
		{"/untrusted", 502, "certificate did not verify", "certificate signed by unknown authority"},
		{"/unverified", 200, "untrusted client=-", ""},
		{"/mtls", 200, "mutual client=gw-client", ""},
		{"/mtls-none", 502, "TLS", "remote error: tls:"},
		{"/mtls-ssl", 200, "mutual client=gw-client", ""},
	} {
		resp, body := in.get(tt.path)
		if resp.StatusCode != tt.status || !strings.Contains(body, tt.body) {
			t.Errorf("GET %s: %d %q, want %d with %q", tt.path, resp.StatusCode, body, tt.status, tt.body)
		}
		if tt.errorLog != "" && !waitFor(5*time.Second, func() bool { return strings.Contains(in.errorLog(), tt.errorLog) }) {
			t.Errorf("GET %s: error.log lacks %q:\n%s", tt.path, tt.errorLog, lastLines(in.errorLog(), 10))
		}
	}

	// A mismatched client pair is refused by the Admin API, naming the field and not the key.
	_, otherKey := clientCA.issue(t, x509.ExtKeyUsageClientAuth, "other")
	status, body := putRoute("bad", map[string]any{"nodes": nodes(mutual), "tls": map[string]any{"client_cert": clientCert, "client_key": otherKey}})
	if status != 400 || !strings.Contains(body, `upstream.tls.client_key`) || strings.Contains(body, "PRIVATE KEY") {
		t.Errorf("mismatched client pair: %d %s, want 400 naming upstream.tls.client_key", status, body)
	}
}

// discardErrors silences net/http's log of the handshakes the tests make fail.
var discardErrors = log.New(io.Discard, "", 0)
