package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwt-auth through the real binary: consumers written through the Admin API, an HS256
// secret and an ES256 public key from the master's environment, tokens from header,
// query and cookie (hidden from the upstream), APISIX's 401 bodies, and the refusals of
// bad consumers.
func TestJWTAuth(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	t.Setenv("GW_ITEST_JWT_PUBLIC_KEY", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	t.Setenv("GW_ITEST_JWT_SECRET", "my-secret-key")

	up := startUpstream(t, "hello world")
	in := newInstance(t, "")
	in.start("--workers", "2")
	// t/plugin/jwt-auth.t TEST 3 "add consumer with username and plugins", the secret
	// from the environment.
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"jwt-auth":{"key":"user-key","secret":"$env://GW_ITEST_JWT_SECRET"}}}`)
	// TEST 46 "add consumer with ... public_key (ES256)".
	in.mustPut("/apisix/admin/consumers", `{"username":"kerouac","plugins":{"jwt-auth":{"key":"user-key-es256","algorithm":"ES256","public_key":"$env://GW_ITEST_JWT_PUBLIC_KEY"}}}`)
	// TEST 4 "enable jwt auth plugin using admin api".
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"jwt-auth":{"hide_credentials":true}},"upstream":{"nodes":{%q:1}}}`, up.addr))

	hs := func(claims jwt.MapClaims) string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("my-secret-key"))
		return s
	}
	valid := hs(jwt.MapClaims{"key": "user-key", "exp": time.Now().Add(time.Hour).Unix()})
	es, _ := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"key": "user-key-es256"}).SignedString(ec)

	cases := []struct {
		name    string
		uri     string
		headers []string
		status  int
		body    string
	}{
		// TEST 5 "verify, missing token".
		{"missing", "/hello", nil, 401, `{"message":"Missing JWT token in request"}`},
		// TEST 6 "verify: invalid JWT token".
		{"invalid", "/hello?jwt=invalid-" + valid, nil, 401, `{"message":"JWT token invalid"}`},
		// TEST 7 "verify: expired JWT token".
		{"expired", "/hello?jwt=" + hs(jwt.MapClaims{"key": "user-key", "exp": 1563870501}), nil, 401, `{"message":"failed to verify jwt"}`},
		{"unknown key", "/hello?jwt=" + hs(jwt.MapClaims{"key": "nobody"}), nil, 401, `{"message":"Invalid user key in JWT token"}`},
		// TEST 8, 9, 10: header, cookie, header without Bearer.
		{"header", "/hello", []string{"Authorization", "Bearer " + valid}, 200, "hello world"},
		{"cookie", "/hello", []string{"Cookie", "jwt=" + valid}, 200, "hello world"},
		{"query", "/hello?jwt=" + valid, nil, 200, "hello world"},
		// TEST 48 "sign/verify use ES256 algorithm".
		{"ES256", "/hello", []string{"Authorization", es}, 200, "hello world"},
	}
	in.overBothProtocols(func() {
		for _, tc := range cases {
			resp, body := in.get(tc.uri, tc.headers...)
			if resp.StatusCode != tc.status || strings.TrimSpace(body) != tc.body {
				t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, body, tc.status, tc.body)
				continue
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") != `Bearer realm="jwt"` {
				t.Errorf("%s: WWW-Authenticate %q", tc.name, resp.Header.Get("WWW-Authenticate"))
			}
			if tc.status == 200 && strings.Contains(resp.Header.Get("X-Seen-Path"), "jwt=") {
				t.Errorf("%s: hide_credentials left the token in %q", tc.name, resp.Header.Get("X-Seen-Path"))
			}
		}
	})

	// TEST 49 "add consumer missing public_key (algorithm=RS256)", and a key taken.
	for body, want := range map[string]string{
		`{"username":"k2","plugins":{"jwt-auth":{"key":"user-key-res256","algorithm":"RS256"}}}`:   `public_key: is required with algorithm \"RS256\"`,
		`{"username":"k3","plugins":{"jwt-auth":{"key":"user-key","secret":"x"}}}`:                 "duplicate key of plugin jwt-auth found with consumer: jack",
		`{"username":"k4","plugins":{"jwt-auth":{"key":"k4","secret":"%%","base64_secret":true}}}`: "base64_secret required but the secret is not in base64 format",
		`{"username":"k5","plugins":{"jwt-auth":{"key":"k5","secret":"s","exp":60}}}`:              "exp: 60 is not supported yet",
	} {
		status, resp := in.adminCall("PUT", "/apisix/admin/consumers", body)
		if status != 400 || !strings.Contains(resp, want) {
			t.Errorf("PUT %s: %d %s, want 400 with %q", body, status, resp, want)
		}
	}
	// The consumer schema is served (t/plugin/jwt-auth.t TEST 21).
	status, resp := in.adminCall("GET", "/apisix/admin/plugins/jwt-auth?schema_type=consumer", "")
	var schema map[string]any
	if status != 200 || json.Unmarshal([]byte(resp), &schema) != nil || schema["required"] == nil {
		t.Errorf("consumer schema: %d %s", status, resp)
	}
}
