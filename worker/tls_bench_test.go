package worker

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
)

// BenchmarkTLSHandshake is the cost of a new TLS connection: a full handshake with each key
// type, and a TLS 1.3 resumption from a session ticket. Client and server both run here,
// so the figure is an upper bound for the server's share.
func BenchmarkTLSHandshake(b *testing.B) {
	ec := newECCert(b, "ec.test")
	rsaCert := newRSACert(b, "rsa.test")
	store := newCertStore("", testLog())
	table, pairs, leftOut := store.compile([]conf.SSL{
		{ID: "ec", Cert: ec.cert, Key: ec.key, SNI: "ec.test"},
		{ID: "rsa", Cert: rsaCert.cert, Key: rsaCert.key, SNI: "rsa.test"},
	})
	if leftOut != nil {
		b.Fatal(leftOut)
	}
	store.commit(table, pairs)
	for _, bc := range []struct {
		name   string
		sni    string
		client *tls.Config
	}{
		{"ecdsa-p256/tls13", "ec.test", &tls.Config{}},
		{"rsa2048/tls13", "rsa.test", &tls.Config{}},
		{"ecdsa-p256/tls12", "ec.test", &tls.Config{MaxVersion: tls.VersionTLS12}},
		{"ecdsa-p256/tls13-resumed", "ec.test", &tls.Config{ClientSessionCache: tls.NewLRUClientSessionCache(1)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := handshake(b, store, bc.sni, bc.client); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkServeKeepAlive is the per-request cost of TLS once the connection is up: the
// same fasthttp server and handler over loopback TCP, plain and TLS 1.3.
func BenchmarkServeKeepAlive(b *testing.B) {
	c := newECCert(b, "a.test")
	store := newCertStore("", testLog())
	table, pairs, _ := store.compile([]conf.SSL{{ID: "1", Cert: c.cert, Key: c.key, SNI: "a.test"}})
	store.commit(table, pairs)
	body := []byte("1234567890")
	for _, useTLS := range []bool{false, true} {
		name := "plain"
		if useTLS {
			name = "tls13"
		}
		b.Run(name, func(b *testing.B) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ln := raw
			if useTLS {
				ln = tls.NewListener(raw, store.listener)
			}
			srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBody(body) }}
			go srv.Serve(ln)
			defer srv.Shutdown()
			client := &fasthttp.HostClient{Addr: raw.Addr().String(), IsTLS: useTLS, MaxConns: 1,
				TLSConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "a.test"}}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			if useTLS {
				req.SetRequestURI("https://a.test/")
			} else {
				req.SetRequestURI("http://a.test/")
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := client.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Fatalf("request: %v, status %d", err, resp.StatusCode())
				}
			}
		})
	}
}
