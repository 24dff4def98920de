package conf

import (
	"crypto/x509"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"gw/internal/testcert"
)

// upstreamWithTLS is an https upstream's JSON with tls set to tlsJSON.
func upstreamWithTLS(tlsJSON string) string {
	return `{"nodes":{"a:1":1},"scheme":"https","tls":` + tlsJSON + `}`
}

func quoteJSON(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDecodeUpstreamTLS(t *testing.T) {
	pair := newTestPair(t, ecKey(t), time.Now().Add(time.Hour), "client.example")
	cert, key := quoteJSON(t, pair.cert), quoteJSON(t, pair.key)
	accept := []struct {
		name string
		body string
		want *UpstreamTLS
	}{
		{"empty", upstreamWithTLS(`{}`), &UpstreamTLS{}},
		{"verify false", upstreamWithTLS(`{"verify":false}`), &UpstreamTLS{Verify: new(false)}},
		{"verify true", upstreamWithTLS(`{"verify":true}`), &UpstreamTLS{Verify: new(true)}},
		{"client pair", upstreamWithTLS(`{"client_cert":` + cert + `,"client_key":` + key + `}`),
			&UpstreamTLS{ClientCert: pair.cert, ClientKey: pair.key}},
		{"client_cert_id string", upstreamWithTLS(`{"client_cert_id":"c1","verify":true}`), &UpstreamTLS{ClientCertID: "c1", Verify: new(true)}},
		{"client_cert_id integer", upstreamWithTLS(`{"client_cert_id":7}`), &UpstreamTLS{ClientCertID: "7"}},
		{"https without tls", `{"nodes":{"a:1":1},"scheme":"https"}`, nil},
	}
	for _, tt := range accept {
		t.Run(tt.name, func(t *testing.T) {
			u, err := DecodeUpstream([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(u.TLS, tt.want) {
				t.Errorf("tls = %#v, want %#v", u.TLS, tt.want)
			}
		})
	}

	const invalid = `invalid configuration: property `
	reject := []struct {
		name string
		body string
		want string
	}{
		{"not an object", upstreamWithTLS(`true`), invalid + `"tls" validation failed: wrong type: expected object, got boolean true`},
		{"unknown field", upstreamWithTLS(`{"ca":"x"}`), invalid + `"tls.ca" validation failed: unknown field`},
		{"verify not bool", upstreamWithTLS(`{"verify":"no"}`), invalid + `"tls.verify" validation failed: wrong type: expected boolean, got string "no"`},
		{"cert without key", upstreamWithTLS(`{"client_cert":` + cert + `}`), invalid + `"tls.client_key" validation failed: is required with client_cert`},
		{"key without cert", upstreamWithTLS(`{"client_key":` + key + `}`), invalid + `"tls.client_cert" validation failed: is required with client_key`},
		{"id and pair", upstreamWithTLS(`{"client_cert_id":1,"client_cert":` + cert + `,"client_key":` + key + `}`),
			invalid + `"tls.client_cert_id" validation failed: give either client_cert_id or client_cert and client_key, not both`},
		{"id and key", upstreamWithTLS(`{"client_cert_id":1,"client_key":` + key + `}`), invalid + `"tls.client_cert_id" validation failed: give either`},
		{"bad id", upstreamWithTLS(`{"client_cert_id":"a b"}`), invalid + `"tls.client_cert_id" validation failed: id must be`},
		{"cert not string", upstreamWithTLS(`{"client_cert":1,"client_key":` + key + `}`), invalid + `"tls.client_cert" validation failed: wrong type: expected string`},
		{"empty key", upstreamWithTLS(`{"client_cert":` + cert + `,"client_key":""}`), invalid + `"tls.client_key" validation failed: must not be empty`},
		{"secret reference", upstreamWithTLS(`{"client_cert":` + cert + `,"client_key":"$secret://vault/k"}`), invalid + `"tls.client_key" validation failed: secret references`},
		{"scheme http", `{"nodes":{"a:1":1},"scheme":"http","tls":{"verify":true}}`,
			invalid + `"tls" validation failed: applies only to schemes "https" and "grpcs", got scheme "http"; set "scheme": "https" (or "grpcs") or remove tls`},
		{"scheme left out", `{"nodes":{"a:1":1},"tls":{}}`, invalid + `"tls" validation failed: applies only to schemes "https" and "grpcs", got scheme "http"`},
	}
	for _, tt := range reject {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeUpstream([]byte(tt.body))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error %v, want one starting %q", err, tt.want)
			}
			if strings.Contains(err.Error(), keyBody(pair.key)) {
				t.Errorf("the error shows the private key: %v", err)
			}
		})
	}

	// Inline in a route, the path says where.
	_, err := DecodeRoute([]byte(`{"uri":"/a","upstream":{"nodes":{"a:1":1},"tls":{"verify":true}}}`))
	if err == nil || !strings.Contains(err.Error(), `"upstream.tls" validation failed: applies only to schemes "https" and "grpcs"`) {
		t.Errorf("route: error %v, want one naming upstream.tls", err)
	}
}

// clientPair is a self-signed client certificate with extended key usages.
func clientPair(t *testing.T, notAfter time.Time, usage ...x509.ExtKeyUsage) testPair {
	t.Helper()
	c := testcert.SelfSigned(t, testcert.Options{CommonName: "gw-client", Usage: usage,
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter})
	return testPair{cert: c.CertPEM, key: c.KeyPEM}
}

func TestCheckClientCertificate(t *testing.T) {
	hour := time.Now().Add(time.Hour)
	good := clientPair(t, hour, x509.ExtKeyUsageClientAuth)
	other := newTestPair(t, ecKey(t), hour, "other.example")
	tests := []struct {
		name      string
		path      string
		cert, key string
		pair      testPair // instead of cert and key
		wantErr   string   // "" to accept
	}{
		{name: "client auth", cert: good.cert, key: good.key},
		{name: "no extended key usage", cert: other.cert, key: other.key},
		{name: "any usage", pair: clientPair(t, hour, x509.ExtKeyUsageAny)},
		{name: "server and client", pair: clientPair(t, hour, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)},

		{name: "key of another certificate", cert: good.cert, key: other.key, wantErr: `property "tls.client_key" validation failed: does not match the certificate in "tls.client_cert"`},
		{name: "inline path", path: "upstream", cert: good.cert, key: other.key, wantErr: `property "upstream.tls.client_key" validation failed: does not match the certificate in "upstream.tls.client_cert"`},
		{name: "expired", pair: clientPair(t, time.Now().Add(-time.Hour), x509.ExtKeyUsageClientAuth),
			wantErr: `property "tls.client_cert" validation failed: the certificate for CN=gw-client expired on`},
		{name: "server only", pair: clientPair(t, hour, x509.ExtKeyUsageServerAuth),
			wantErr: `property "tls.client_cert" validation failed: the certificate for CN=gw-client does not allow client authentication`},
		{name: "not PEM", cert: "hello", key: good.key, wantErr: `property "tls.client_cert" validation failed: failed to parse cert: no PEM CERTIFICATE block found`},
		{name: "key in cert", cert: good.key, key: good.key, wantErr: `property "tls.client_cert" validation failed: failed to parse cert: PEM block 1 is "PRIVATE KEY", expected CERTIFICATE; a private key belongs in "key"`},
		{name: "cert in key", cert: good.cert, key: good.cert, wantErr: `property "tls.client_key" validation failed: failed to parse key: the PEM block is "CERTIFICATE", expected a PRIVATE KEY`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, key := tt.cert, tt.key
			if tt.pair.cert != "" {
				cert, key = tt.pair.cert, tt.pair.key
			}
			u := &Upstream{Scheme: "https", TLS: &UpstreamTLS{ClientCert: cert, ClientKey: key}}
			err := u.CheckClientCertificate(tt.path)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(strings.TrimPrefix(err.Error(), "invalid configuration: "), tt.wantErr)):
				t.Fatalf("error %v, want one starting %q", err, tt.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), keyBody(good.key)) || strings.Contains(err.Error(), keyBody(other.key))) {
				t.Errorf("the error shows a private key: %v", err)
			}
		})
	}
	for _, u := range []*Upstream{nil, {}, {TLS: &UpstreamTLS{ClientCertID: "1"}}} {
		if err := u.CheckClientCertificate(""); err != nil {
			t.Errorf("%+v: %v, want nothing to check", u, err)
		}
	}
}

func TestCheckClientSSL(t *testing.T) {
	for _, tt := range []struct {
		name string
		ssl  *SSL
		want string
	}{
		{"client", &SSL{Type: SSLTypeClient}, ""},
		{"missing", nil, "failed to fetch ssl info by ssl id [9], response code: 404"},
		{"server", &SSL{Type: SSLTypeServer}, `ssl id [9] is of type "server"; tls.client_cert_id needs an ssl of type "client"`},
		{"default type", &SSL{}, `ssl id [9] is of type "server"`},
	} {
		err := CheckClientSSL("9", tt.ssl)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestResolveClientCerts(t *testing.T) {
	snap := &Snapshot{
		SSLs: []SSL{
			{ID: "c", Type: SSLTypeClient, Cert: "CERT", Key: "KEY"},
			{ID: "s", Cert: "SERVER CERT", Key: "SERVER KEY"},
		},
		Upstreams: []Upstream{
			{ID: "1", TLS: &UpstreamTLS{ClientCertID: "c"}},
			{ID: "2", TLS: &UpstreamTLS{ClientCertID: "s"}},               // not a client ssl
			{ID: "3", TLS: &UpstreamTLS{ClientCertID: "gone"}},            // dangling
			{ID: "4", TLS: &UpstreamTLS{ClientCert: "A", ClientKey: "B"}}, // inline: left alone
			{ID: "5"},
		},
		Services: []Service{{ID: "s1", Upstream: &Upstream{TLS: &UpstreamTLS{ClientCertID: "c"}}}, {ID: "s2"}},
		Routes:   []Route{{ID: "r1", Upstream: &Upstream{TLS: &UpstreamTLS{ClientCertID: "c"}}}, {ID: "r2"}},
	}
	snap.ResolveClientCerts()
	pairOf := func(u *Upstream) string { return u.TLS.ClientCert + "/" + u.TLS.ClientKey }
	for _, c := range []struct {
		name string
		u    *Upstream
		want string
	}{
		{"stored", &snap.Upstreams[0], "CERT/KEY"},
		{"server ssl", &snap.Upstreams[1], "/"},
		{"dangling", &snap.Upstreams[2], "/"},
		{"inline pair", &snap.Upstreams[3], "A/B"},
		{"service", snap.Services[0].Upstream, "CERT/KEY"},
		{"route", snap.Routes[0].Upstream, "CERT/KEY"},
	} {
		if got := pairOf(c.u); got != c.want {
			t.Errorf("%s: pair %q, want %q", c.name, got, c.want)
		}
	}
}

func TestUpstreamTLSStringHidesKey(t *testing.T) {
	pair := newTestPair(t, ecKey(t), time.Now().Add(time.Hour), "client.example")
	tls := UpstreamTLS{ClientCert: pair.cert, ClientKey: pair.key}
	for _, s := range []string{tls.String(), tls.GoString()} {
		if strings.Contains(s, keyBody(pair.key)) || !strings.Contains(s, "verify true") {
			t.Errorf("%q: want no key and verify true", s)
		}
	}
}

func TestParseTrustedCertificate(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    string
		wantErr string
	}{
		{name: "default", yaml: "", want: ""},
		{name: "set", yaml: "ssl: {ssl_trusted_certificate: conf/ca.pem}", want: "conf/ca.pem"},
		{name: "with the listener keys", yaml: "ssl:\n  enabled: true\n  ssl_trusted_certificate: /etc/ssl/ca.pem\n  fallback_sni: a.example", want: "/etc/ssl/ca.pem"},
		{name: "null keeps the default", yaml: "ssl: {ssl_trusted_certificate: }", want: ""},
		{name: "not a string", yaml: "ssl: {ssl_trusted_certificate: [a]}", wantErr: "f.yaml:1: ssl.ssl_trusted_certificate: must be a string, got a list"},
		{name: "twice", yaml: "ssl:\n  ssl_trusted_certificate: a\n  ssl_trusted_certificate: b", wantErr: "f.yaml:3: ssl.ssl_trusted_certificate: set twice (first at line 2)"},
		{name: "other keys still checked", yaml: "ssl: {ssl_trusted_certificate: a, bogus: 1}", wantErr: "f.yaml:1: ssl.bogus: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "f.yaml")
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.SSLTrustedCertificate != tt.want {
				t.Errorf("ssl_trusted_certificate = %q, want %q", c.SSLTrustedCertificate, tt.want)
			}
			if tt.name == "with the listener keys" && (!c.SSL.Enabled || c.SSL.FallbackSNI != "a.example") {
				t.Errorf("the rest of ssl was lost: %+v", c.SSL)
			}
		})
	}
}

// APISIX Dashboard's upstream form sends "tls": {"verify": false} and "discovery_args": {}
// with every upstream, whatever the scheme. Both ask for nothing a plaintext upstream does
// not already do, APISIX accepts them, and a GET gives them back as written.
func TestUpstreamAcceptsDashboardDefaults(t *testing.T) {
	for _, scheme := range []string{`,"scheme":"http"`, `,"scheme":"grpc"`, ``} {
		body := `{"nodes":[{"host":"127.0.0.1","port":80,"weight":1,"priority":0}],"type":"roundrobin","hash_on":"vars","pass_host":"pass","tls":{"verify":false},"discovery_args":{}` + scheme + `}`
		u, err := DecodeUpstream([]byte(body))
		if err != nil {
			t.Fatalf("scheme %s: %v", scheme, err)
		}
		out, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"tls":{"verify":false}`, `"discovery_args":{}`} {
			if !strings.Contains(string(out), want) {
				t.Errorf("scheme %s: stored %s, want it to hold %s", scheme, out, want)
			}
		}
		if _, err := DecodeUpstream(out); err != nil {
			t.Errorf("scheme %s: what was stored does not decode again: %v", scheme, err)
		}
	}
	// Inline in a route, too.
	if _, err := DecodeRoute([]byte(`{"uri":"/a","upstream":{"nodes":{"a:1":1},"tls":{"verify":false},"discovery_args":{}}}`)); err != nil {
		t.Errorf("route: %v", err)
	}
	// verify:false beside a client certificate on plain http still does nothing: refused.
	_, err := DecodeUpstream([]byte(`{"nodes":{"a:1":1},"tls":{"verify":false,"client_cert_id":"1"}}`))
	if err == nil || !strings.Contains(err.Error(), `"tls" validation failed: applies only to schemes "https" and "grpcs"`) {
		t.Errorf("client_cert_id over http: error %v, want the scheme refusal", err)
	}
}
