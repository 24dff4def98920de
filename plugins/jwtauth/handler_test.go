package jwtauth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

// keys are the test's signing keys, made once.
var keys = func() (k struct {
	rsa   *rsa.PrivateKey
	ec    *ecdsa.PrivateKey
	ed    ed25519.PrivateKey
	pemOf func(pub any) string
}) {
	k.rsa, _ = rsa.GenerateKey(rand.Reader, 2048)
	k.ec, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, k.ed, _ = ed25519.GenerateKey(rand.Reader)
	k.pemOf = func(pub any) string {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			panic(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	}
	return k
}()

func consumer(username, cfg string) conf.Consumer {
	return conf.Consumer{Username: username, Plugins: map[string]json.RawMessage{Name: json.RawMessage(cfg)}}
}

func pemJSON(pub any) string { b, _ := json.Marshal(keys.pemOf(pub)); return string(b) }

func snapshot() *conf.Snapshot {
	return &conf.Snapshot{Consumers: []conf.Consumer{
		// t/plugin/jwt-auth.t TEST 3.
		consumer("jack", `{"key":"user-key","secret":"my-secret-key"}`),
		// TEST 14.
		consumer("rose", `{"key":"b64-key","secret":"fo4XKdZ1xSrIZyms4q2BwPrW5lMpls9qqy5tiAk2esc=","base64_secret":true}`),
		consumer("hs512", `{"key":"hs512-key","secret":"s512","algorithm":"HS512"}`),
		consumer("kerouac", `{"key":"rs-key","algorithm":"RS256","public_key":`+pemJSON(&keys.rsa.PublicKey)+`}`),
		consumer("ps", `{"key":"ps-key","algorithm":"PS256","public_key":`+pemJSON(&keys.rsa.PublicKey)+`}`),
		consumer("ec", `{"key":"es-key","algorithm":"ES256","public_key":`+pemJSON(&keys.ec.PublicKey)+`}`),
		consumer("ed", `{"key":"ed-key","algorithm":"EdDSA","public_key":`+pemJSON(keys.ed.Public())+`}`),
		consumer("lenient", `{"key":"grace-key","secret":"g","lifetime_grace_period":60}`),
		consumer("guest", `{"key":"guest-key","secret":"x"}`),
		// A secret the master could not resolve: nothing it signs passes.
		consumer("vault", `{"key":"vault-key","secret":"$env://GW_UNSET"}`),
	}}
}

func instance(t testing.TB, cfg string) *jwtAuth {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{Snapshot: snapshot()})
	if err != nil {
		t.Fatal(err)
	}
	j := built.(*jwtAuth)
	j.now = func() time.Time { return time.Unix(1_700_000_000, 0) }
	return j
}

const now = 1_700_000_000

func sign(t testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func request(uri string, headers ...string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("gw.test")
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	return ctx
}

// APISIX's own tokens (t/plugin/jwt-auth.t): key "user-key", signed with
// "my-secret-key"; the first expired in 2019, the second expires in 2029, the third has
// no exp.
const (
	expiredToken = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrZXkiOiJ1c2VyLWtleSIsImV4cCI6MTU2Mzg3MDUwMX0.pPNVvh-TQsdDzorRwa-uuiLYiEBODscp9wv0cwD6c68"
	validToken   = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrZXkiOiJ1c2VyLWtleSIsImV4cCI6MTg3OTMxODU0MX0.fNtFJnNmJgzbiYmGB0Yjvm-l6A6M4jRV1l4mnVFSYjs"
	noExpToken   = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrZXkiOiJ1c2VyLWtleSJ9._7aoTZdzQDT0r9swHTcHb3nsujexcGjSTU-LRzTRVyY"
	// TEST 19's token for the base64 secret.
	b64Token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrZXkiOiJ1c2VyLWtleSIsImV4cCI6MTg3OTMxODU0MX0._kNmXeH1uYVAvApFTONk2Z3Gh-a4XfGrjmqd_ahoOI0"
)

func TestAccess(t *testing.T) {
	hs := func(secret string, claims jwt.MapClaims) string {
		return sign(t, jwt.SigningMethodHS256, []byte(secret), claims)
	}
	rs := sign(t, jwt.SigningMethodRS256, keys.rsa, jwt.MapClaims{"key": "rs-key", "exp": now + 60})
	// TEST 52 "HS256 token against RS256 consumer": the public key's PEM as an HMAC secret.
	forged := hs(keys.pemOf(&keys.rsa.PublicKey), jwt.MapClaims{"key": "rs-key", "exp": now + 60})
	cases := []struct {
		name, cfg, uri string
		headers        []string
		// wantConsumer is the consumer let through; "" means a 401 with wantBody.
		wantConsumer, wantBody string
	}{
		// t/plugin/jwt-auth.t TEST 5 "verify, missing token".
		{name: "missing", uri: "/hello", wantBody: `{"message":"Missing JWT token in request"}`},
		// TEST 6 "verify: invalid JWT token".
		{name: "invalid", uri: "/hello?jwt=invalid-" + validToken, wantBody: `{"message":"JWT token invalid"}`},
		{name: "two segments", uri: "/hello?jwt=a.b", wantBody: `{"message":"JWT token invalid"}`},
		// TEST 7 "verify: expired JWT token".
		{name: "expired", uri: "/hello?jwt=" + expiredToken, wantBody: `{"message":"failed to verify jwt"}`},
		// TEST 8-11: header with Bearer, cookie, header raw, bearer.
		{name: "header bearer", uri: "/hello", headers: []string{"Authorization", "Bearer " + validToken}, wantConsumer: "jack"},
		{name: "cookie", uri: "/hello", headers: []string{"Cookie", "a=1; jwt=" + validToken}, wantConsumer: "jack"},
		{name: "header raw", uri: "/hello", headers: []string{"Authorization", validToken}, wantConsumer: "jack"},
		{name: "header lower bearer", uri: "/hello", headers: []string{"Authorization", "bearer " + validToken}, wantConsumer: "jack"},
		{name: "query", uri: "/hello?jwt=" + validToken, wantConsumer: "jack"},
		// TEST 12 "verify (invalid bearer token)".
		{name: "invalid bearer", uri: "/hello", headers: []string{"Authorization", "bearer invalid-" + validToken}, wantBody: `{"message":"JWT token invalid"}`},
		// The header wins: a bad header fails though the query holds a good token.
		{name: "header first", uri: "/hello?jwt=" + validToken, headers: []string{"Authorization", "Bearer x.y"}, wantBody: `{"message":"JWT token invalid"}`},
		// TEST 18 "verify: invalid signature" (signed with the other secret).
		{name: "bad signature", uri: "/hello?jwt=" + hs("other", jwt.MapClaims{"key": "user-key"}), wantBody: `{"message":"failed to verify jwt"}`},
		// TEST 19 "verify: happy path" with the base64 secret.
		{name: "base64 secret", uri: "/hello?jwt=" + b64Token, cfg: `{}`, wantBody: `{"message":"failed to verify jwt"}`}, // key "user-key" is jack's
		{name: "base64 secret right key", uri: "/hello?jwt=" + func() string {
			secret, _ := decodeBase64("fo4XKdZ1xSrIZyms4q2BwPrW5lMpls9qqy5tiAk2esc=")
			return hs(string(secret), jwt.MapClaims{"key": "b64-key"})
		}(), wantConsumer: "rose"},
		{name: "missing key claim", uri: "/hello?jwt=" + hs("my-secret-key", jwt.MapClaims{"sub": "user-key"}), wantBody: `{"message":"missing user key in JWT token"}`},
		{name: "unknown key", uri: "/hello?jwt=" + hs("my-secret-key", jwt.MapClaims{"key": "nobody"}), wantBody: `{"message":"Invalid user key in JWT token"}`},
		{name: "key not a string", uri: "/hello?jwt=" + hs("my-secret-key", jwt.MapClaims{"key": 1}), wantBody: `{"message":"Invalid user key in JWT token"}`},
		{name: "key_claim_name", cfg: `{"key_claim_name":"iss"}`, uri: "/hello?jwt=" + hs("my-secret-key", jwt.MapClaims{"iss": "user-key"}), wantConsumer: "jack"},
		// TEST 56: no exp, no claims_to_verify: accepted.
		{name: "no exp", uri: "/hello?jwt=" + noExpToken, wantConsumer: "jack"},
		{name: "no exp required", cfg: `{"claims_to_verify":["exp"]}`, uri: "/hello?jwt=" + noExpToken, wantBody: `{"message":"failed to verify jwt"}`},
		{name: "nbf in future", uri: "/hello?jwt=" + hs("my-secret-key", jwt.MapClaims{"key": "user-key", "nbf": now + 10}), wantBody: `{"message":"failed to verify jwt"}`},
		{name: "nbf past", uri: "/hello?jwt=" + hs("my-secret-key", jwt.MapClaims{"key": "user-key", "nbf": now - 1}), wantConsumer: "jack"},
		{name: "nbf not checked", cfg: `{"claims_to_verify":["exp"]}`, uri: "/hello?jwt=" + hs("my-secret-key", jwt.MapClaims{"key": "user-key", "exp": now + 10, "nbf": now + 10}), wantConsumer: "jack"},
		{name: "exp a string", uri: "/hello?jwt=" + hs("my-secret-key", jwt.MapClaims{"key": "user-key", "exp": "2100"}), wantBody: `{"message":"failed to verify jwt"}`},
		// lifetime_grace_period: 60 s of leeway either side.
		{name: "grace exp", uri: "/hello?jwt=" + hs("g", jwt.MapClaims{"key": "grace-key", "exp": now - 30}), wantConsumer: "lenient"},
		{name: "grace exp past", uri: "/hello?jwt=" + hs("g", jwt.MapClaims{"key": "grace-key", "exp": now - 61}), wantBody: `{"message":"failed to verify jwt"}`},
		{name: "grace nbf", uri: "/hello?jwt=" + hs("g", jwt.MapClaims{"key": "grace-key", "nbf": now + 30}), wantConsumer: "lenient"},
		{name: "HS512", uri: "/hello?jwt=" + sign(t, jwt.SigningMethodHS512, []byte("s512"), jwt.MapClaims{"key": "hs512-key"}), wantConsumer: "hs512"},
		{name: "HS256 for an HS512 consumer", uri: "/hello?jwt=" + hs("s512", jwt.MapClaims{"key": "hs512-key"}), wantBody: `{"message":"failed to verify jwt"}`},
		// TEST 25 "JWT sign and verify use RS256 algorithm".
		{name: "RS256", uri: "/hello?jwt=" + rs, wantConsumer: "kerouac"},
		{name: "PS256", uri: "/hello?jwt=" + sign(t, jwt.SigningMethodPS256, keys.rsa, jwt.MapClaims{"key": "ps-key"}), wantConsumer: "ps"},
		// TEST 47 "JWT sign and verify use ES256 algorithm".
		{name: "ES256", uri: "/hello?jwt=" + sign(t, jwt.SigningMethodES256, keys.ec, jwt.MapClaims{"key": "es-key"}), wantConsumer: "ec"},
		{name: "EdDSA", uri: "/hello?jwt=" + sign(t, jwt.SigningMethodEdDSA, keys.ed, jwt.MapClaims{"key": "ed-key"}), wantConsumer: "ed"},
		{name: "HS256 forged with the public key", uri: "/hello?jwt=" + forged, wantBody: `{"message":"failed to verify jwt"}`},
		{name: "alg none", uri: "/hello?jwt=" + sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"key": "user-key"}), wantBody: `{"message":"failed to verify jwt"}`},
		{name: "unresolved secret", uri: "/hello?jwt=" + hs("$env://GW_UNSET", jwt.MapClaims{"key": "vault-key"}), wantBody: `{"message":"Invalid user key in JWT token"}`},
		{name: "custom header", cfg: `{"header":"X-JWT"}`, uri: "/hello", headers: []string{"X-JWT", validToken}, wantConsumer: "jack"},
		{name: "custom query", cfg: `{"query":"token"}`, uri: "/hello?token=" + validToken, wantConsumer: "jack"},
		{name: "custom cookie", cfg: `{"cookie":"session"}`, uri: "/hello", headers: []string{"Cookie", "session=" + validToken}, wantConsumer: "jack"},
		// t/plugin/jwt-auth-anonymous-consumer.t: a bad token runs as the anonymous consumer.
		{name: "anonymous", cfg: `{"anonymous_consumer":"guest"}`, uri: "/hello", wantConsumer: "guest"},
		{name: "anonymous missing", cfg: `{"anonymous_consumer":"nobody"}`, uri: "/hello", wantBody: `{"message":"Invalid user authorization"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg == "" {
				tc.cfg = `{}`
			}
			ctx := request(tc.uri, tc.headers...)
			c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
			defer plugins.ReleaseCtx(c)
			if err := instance(t, tc.cfg).Access(c); err != nil {
				t.Fatal(err)
			}
			c.ApplyResponseHeaders()
			if tc.wantConsumer != "" {
				if c.Answered() || c.Consumer != tc.wantConsumer {
					t.Fatalf("answered %v %s, consumer %q; want %q let through", c.Answered(), ctx.Response.Body(), c.Consumer, tc.wantConsumer)
				}
				return
			}
			if !c.Answered() || ctx.Response.StatusCode() != 401 || string(ctx.Response.Body()) != tc.wantBody+"\n" {
				t.Fatalf("got %d %q, want 401 %s", ctx.Response.StatusCode(), ctx.Response.Body(), tc.wantBody)
			}
			// t/plugin/jwt-auth-realm.t: the challenge names the realm.
			if got := string(ctx.Response.Header.Peek("WWW-Authenticate")); got != `Bearer realm="jwt"` {
				t.Errorf("WWW-Authenticate %q", got)
			}
		})
	}
}

// hide_credentials removes the token from where it was found, and only that.
func TestHideCredentials(t *testing.T) {
	j := instance(t, `{"hide_credentials":true}`)
	cases := []struct {
		uri        string
		headers    []string
		wantURI    string
		wantAuth   string
		wantCookie string
	}{
		{uri: "/a?x=1", headers: []string{"Authorization", "Bearer " + validToken, "Cookie", "jwt=other"}, wantURI: "/a?x=1", wantCookie: "jwt=other"},
		{uri: "/a?x=1&jwt=" + validToken + "&y=2", wantURI: "/a?x=1&y=2"},
		{uri: "/a", headers: []string{"Cookie", "a=1; jwt=" + validToken + "; b=2"}, wantURI: "/a", wantCookie: "a=1; b=2"},
	}
	for _, tc := range cases {
		ctx := request(tc.uri, tc.headers...)
		c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
		if err := j.Access(c); err != nil || c.Answered() || c.Consumer != "jack" {
			t.Fatalf("%s: not let through: %v %s", tc.uri, err, ctx.Response.Body())
		}
		uri := string(ctx.Request.URI().Path())
		if c.ArgsChanged() {
			uri += "?" + string(c.AppendQueryArgs(nil))
		} else if q := ctx.Request.URI().QueryString(); len(q) > 0 {
			uri += "?" + string(q)
		}
		if uri != tc.wantURI || string(ctx.Request.Header.Peek("Authorization")) != tc.wantAuth ||
			string(ctx.Request.Header.Peek("Cookie")) != tc.wantCookie {
			t.Errorf("%s: proxied %s, Authorization %q, Cookie %q; want %s, %q, %q", tc.uri, uri,
				ctx.Request.Header.Peek("Authorization"), ctx.Request.Header.Peek("Cookie"), tc.wantURI, tc.wantAuth, tc.wantCookie)
		}
		plugins.ReleaseCtx(c)
	}
}

// A rejected request allocates nothing; one with a token costs the library's parse of
// its header and claims (maps) and the signature check. The bound holds it there.
func TestAccessAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	j := instance(t, `{}`)
	for _, tc := range []struct {
		name   string
		header string
		max    float64
	}{
		{"missing", "", 0},
		{"HS256", "Bearer " + validToken, 48},
	} {
		ctx := request("/hello")
		if tc.header != "" {
			ctx.Request.Header.Set("Authorization", tc.header)
		}
		route := &plugins.RouteInfo{}
		c := plugins.AcquireCtx(ctx, route, 0)
		allocs := testing.AllocsPerRun(200, func() {
			c.End()
			ctx.Response.Reset()
			c.Begin(ctx, route, 0)
			if j.Access(c) != nil {
				t.Fatal("fault")
			}
		})
		if allocs > tc.max {
			t.Errorf("%s: %.1f allocations per request, want at most %.0f", tc.name, allocs, tc.max)
		}
		t.Logf("%s: %.1f allocations per request", tc.name, allocs)
		plugins.ReleaseCtx(c)
	}
}

func BenchmarkAccess(b *testing.B) {
	j := instance(b, `{}`)
	for _, tc := range []struct{ name, token string }{
		{"HS256", validToken},
		{"RS256", sign(b, jwt.SigningMethodRS256, keys.rsa, jwt.MapClaims{"key": "rs-key"})},
		{"ES256", sign(b, jwt.SigningMethodES256, keys.ec, jwt.MapClaims{"key": "es-key"})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := request("/hello", "Authorization", "Bearer "+tc.token)
			route := &plugins.RouteInfo{}
			c := plugins.AcquireCtx(ctx, route, 0)
			b.ReportAllocs()
			for b.Loop() {
				c.End()
				c.Begin(ctx, route, 0)
				if j.Access(c); c.Answered() {
					b.Fatal("rejected")
				}
			}
		})
	}
}
