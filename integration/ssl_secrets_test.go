package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"gw/internal/testcert"
)

// An ssl's cert and key given as $env://NAME come from the master's environment, at the
// write and at every later start; GET shows the references as written, never a key. A
// reference without a value is a 400 naming the field and the variable, and $secret://
// a 400 saying secret managers are not supported yet.
func TestSSLSecretReferencesFromTheMastersEnvironment(t *testing.T) {
	main := newTLSTestCert(t, "env.example.com")
	extra := testcert.SelfSigned(t, testcert.Options{Names: []string{"env.example.com"}, Key: testcert.RSA})
	t.Setenv("GW_ITEST_SSL_CERT", main.cert)
	t.Setenv("GW_ITEST_SSL_KEY", main.key)
	t.Setenv("GW_ITEST_SSL_PAIR", mustJSON(t, map[string]string{"cert": extra.CertPEM, "key": extra.KeyPEM}))
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in := newInstance(t, fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\n", tlsAddr))
	in.start("--workers", "2")
	in.putRoute("1", "/hello", startUpstream(t, "hello").addr)

	// t/admin/ssl.t TEST 22 "set ssl with env, and prefix is all uppercase or lowercase";
	// t/node/ssl.t TEST 6 "set ssl with two certs and keys in env".
	in.mustPut("/apisix/admin/ssls/1", `{"sni":"env.example.com","cert":"$ENV://GW_ITEST_SSL_CERT","key":"$env://GW_ITEST_SSL_KEY",`+
		`"certs":["$env://GW_ITEST_SSL_PAIR/cert"],"keys":["$ENV://GW_ITEST_SSL_PAIR/key"]}`)
	_, body := in.adminCall("GET", "/apisix/admin/ssls/1", "")
	if !strings.Contains(body, `"cert":"$ENV://GW_ITEST_SSL_CERT"`) || !strings.Contains(body, `"certs":["$env://GW_ITEST_SSL_PAIR/cert"]`) ||
		strings.Contains(body, `"key":"$`) || strings.Contains(body, `"keys"`) || strings.Contains(body, "BEGIN") {
		t.Errorf("GET ssls/1 = %s; want the cert references as written and no key", body)
	}
	served := func(when string) {
		t.Helper()
		serial, resp, got, err := tlsGet(t, tlsAddr, "env.example.com", "/hello", nil)
		if err != nil || serial.Cmp(main.serial) != 0 || resp.StatusCode != 200 || got != "hello" {
			t.Errorf("%s: handshake for env.example.com: %v, serial %v (want %v)", when, err, serial, main.serial)
		}
	}
	served("after the write")

	for _, tc := range []struct{ body, want string }{
		{`{"sni":"b.example.com","cert":"$env://GW_ITEST_SSL_CERT","key":"$env://GW_ITEST_UNSET"}`,
			`property \"key\" validation failed: $env://GW_ITEST_UNSET has no value in the gateway's environment`},
		{`{"sni":"b.example.com","cert":"$env://GW_ITEST_SSL_CERT","key":"$env://GW_ITEST_SSL_KEY","certs":["$env://GW_ITEST_SSL_PAIR/crt"],"keys":["$env://GW_ITEST_SSL_KEY"]}`,
			`property \"certs\" validation failed: item 1: $env://GW_ITEST_SSL_PAIR/crt has no value`},
		{`{"sni":"b.example.com","cert":"$env://GW_ITEST_SSL_CERT","key":"$secret://vault/1/key"}`,
			`property \"key\" validation failed: secret managers ($secret://) are not supported yet`},
	} {
		if status, resp := in.adminCall("PUT", "/apisix/admin/ssls/2", tc.body); status != 400 || !strings.Contains(resp, tc.want) {
			t.Errorf("PUT %s: %d %s; want 400 containing %s", tc.body, status, resp, tc.want)
		}
	}
	if status, _ := in.adminCall("GET", "/apisix/admin/ssls/2", ""); status != 404 {
		t.Errorf("a refused ssl was stored: GET ssls/2 = %d", status)
	}

	in.stop()
	in.start("--workers", "1")
	served("after a restart")
	if log := in.errorLog(); strings.Contains(log, "BEGIN") {
		t.Errorf("the error log holds PEM text:\n%s", lastLines(log, 20))
	}

	// A start without the variable's value leaves that ssl out, and says why.
	in.stop()
	t.Setenv("GW_ITEST_SSL_KEY", "")
	in.start("--workers", "1")
	if _, _, _, err := tlsGet(t, tlsAddr, "env.example.com", "/hello", nil); err == nil {
		t.Error("without its key's variable, ssl 1 still served env.example.com")
	}
	if _, body := in.adminCall("GET", "/apisix/admin/ssls/1", ""); !strings.Contains(body, `"left_out"`) {
		t.Errorf("GET ssls/1 = %s; want it marked left_out", body)
	}
	if log := in.errorLog(); !strings.Contains(log, "ssl 1: key: $env://GW_ITEST_SSL_KEY has no value") ||
		!strings.Contains(log, "stored object ssls/1 is left out and not served: key: $env://GW_ITEST_SSL_KEY has no value in the master's environment") {
		t.Errorf("error.log should name ssl 1's missing variable:\n%s", lastLines(log, 20))
	}
}

// An expired certificate is accepted and served, as APISIX and nginx do, with a warning
// naming its SNIs and the date, and every ssl's expiry is a metric.
func TestSSLExpiredCertificateIsServedAndReported(t *testing.T) {
	notAfter := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	old := testcert.SelfSigned(t, testcert.Options{Names: []string{"old.example.com"}, NotBefore: notAfter.Add(-24 * time.Hour), NotAfter: notAfter})
	valid := testcert.SelfSigned(t, testcert.Options{Names: []string{"new.example.com"}})
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in := newInstance(t, fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\n", tlsAddr))
	in.start("--workers", "1")
	in.putRoute("1", "/hello", startUpstream(t, "hello").addr)
	in.mustPut("/apisix/admin/ssls/old", mustJSON(t, map[string]any{"cert": old.CertPEM, "key": old.KeyPEM, "snis": []string{"old.example.com"}}))
	in.mustPut("/apisix/admin/ssls/new", mustJSON(t, map[string]any{"cert": valid.CertPEM, "key": valid.KeyPEM, "snis": []string{"new.example.com"}}))

	if serial, resp, _, err := tlsGet(t, tlsAddr, "old.example.com", "/hello", nil); err != nil || serial.Cmp(old.Leaf.SerialNumber) != 0 || resp.StatusCode != 200 {
		t.Errorf("handshake for old.example.com: %v, serial %v; want the expired certificate served", err, serial)
	}
	warning := "ssl old (snis [old.example.com]): its certificate expired on " + notAfter.UTC().Format(time.RFC3339)
	if log := in.errorLog(); strings.Count(log, warning) != 1 {
		t.Errorf("error.log should warn once of %q:\n%s", warning, lastLines(log, 20))
	}
	_, page := getOn(t, in.metrics, "/apisix/prometheus/metrics")
	for _, want := range []string{
		fmt.Sprintf(`gw_ssl_certificate_expiry_timestamp_seconds{id="old",sni="old.example.com"} %d`, notAfter.Unix()),
		fmt.Sprintf(`gw_ssl_certificate_expiry_timestamp_seconds{id="new",sni="new.example.com"} %d`, valid.Leaf.NotAfter.Unix()),
	} {
		if !strings.Contains(page, want+"\n") {
			t.Errorf("metrics page lacks %q:\n%s", want, page)
		}
	}

	in.stop()
	in.start("--workers", "1") // accepted at start too, and warned of again
	if _, _, _, err := tlsGet(t, tlsAddr, "old.example.com", "/hello", nil); err != nil {
		t.Errorf("after a restart, handshake for old.example.com: %v", err)
	}
	if log := in.errorLog(); strings.Count(log, warning) != 2 {
		t.Errorf("error.log should warn of %q again at the start:\n%s", warning, lastLines(log, 20))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
