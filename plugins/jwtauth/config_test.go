package jwtauth

import (
	"reflect"
	"strings"
	"testing"

	"gw/conf"
	"gw/plugins"
)

func TestParseAccepts(t *testing.T) {
	defaults := Config{Header: "authorization", Query: "jwt", Cookie: "jwt", KeyClaimName: "key", Realm: "jwt"}
	with := func(f func(*Config)) Config { c := defaults; f(&c); return c }
	cases := map[string]struct {
		raw  string
		want Config
	}{
		"empty":  {`{}`, defaults},
		"header": {`{"header":"X-JWT","query":"token","cookie":"session"}`, with(func(c *Config) { c.Header, c.Query, c.Cookie = "X-JWT", "token", "session" })},
		"hide":   {`{"hide_credentials":true}`, with(func(c *Config) { c.HideCredentials = true })},
		"claim":  {`{"key_claim_name":"iss"}`, with(func(c *Config) { c.KeyClaimName = "iss" })},
		"store":  {`{"store_in_ctx":false}`, with(func(c *Config) {})},
		"realm":  {`{"realm":"api"}`, with(func(c *Config) { c.Realm = "api" })},
		"anon":   {`{"anonymous_consumer":"guest"}`, with(func(c *Config) { c.AnonymousConsumer = "guest" })},
		"claims": {`{"claims_to_verify":["exp","nbf"]}`, with(func(c *Config) { c.ClaimsToVerify = []string{"exp", "nbf"} })},
		// t/plugin/jwt-auth.t TEST 57: an empty list is the default path.
		"no claims": {`{"claims_to_verify":[]}`, with(func(c *Config) { c.ClaimsToVerify = []string{} })},
		"_meta":     {`{"_meta":{"priority":1}}`, defaults},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		"not an object": {`[]`, "must be a JSON object"},
		"unknown":       {`{"key":"k"}`, "key: unknown field"},
		"header empty":  {`{"header":""}`, "header: must not be empty"},
		"query number":  {`{"query":1}`, "query: must be a string, got 1"},
		"claim empty":   {`{"key_claim_name":""}`, "key_claim_name: must not be empty"},
		"hide string":   {`{"hide_credentials":"yes"}`, `hide_credentials: must be a boolean, got "yes"`},
		"realm quote":   {`{"realm":"a\"b"}`, "realm: must be 1-128 printable ASCII"},
		"claims iat":    {`{"claims_to_verify":["iat"]}`, `claims_to_verify[0]: must be "exp" or "nbf", got "iat"`},
		"claims twice":  {`{"claims_to_verify":["exp","exp"]}`, `claims_to_verify[1]: "exp" appears twice`},
		"claims string": {`{"claims_to_verify":"exp"}`, `claims_to_verify: must be an array of "exp" and "nbf", got "exp"`},
		"store":         {`{"store_in_ctx":true}`, "store_in_ctx: true is not supported yet"},
		"store string":  {`{"store_in_ctx":"yes"}`, `store_in_ctx: must be a boolean, got "yes"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// t/plugin/jwt-auth.t TEST 46's ES256 public key.
const es256PublicKey = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEVs/o5+uQbTjL3chynL4wXgUg2R9\nq9UU8I5mEovUf86QZ7kOBIjJwqnzD1omageEHWwHdBO6B+dFabmdT9POxg==\n-----END PUBLIC KEY-----"

func TestParseConsumer(t *testing.T) {
	accepted := map[string]ConsumerConfig{
		// t/plugin/jwt-auth.t TEST 3.
		`{"key":"user-key","secret":"my-secret-key"}`: {Key: "user-key", Secret: "my-secret-key", Algorithm: "HS256"},
		// TEST 14.
		`{"key":"user-key","secret":"fo4XKdZ1xSrIZyms4q2BwPrW5lMpls9qqy5tiAk2esc=","base64_secret":true}`: {Key: "user-key", Secret: "fo4XKdZ1xSrIZyms4q2BwPrW5lMpls9qqy5tiAk2esc=", Base64Secret: true, Algorithm: "HS256"},
		`{"key":"k","secret":"s","algorithm":"HS512","exp":86400,"lifetime_grace_period":5}`:              {Key: "k", Secret: "s", Algorithm: "HS512", LifetimeGracePeriod: 5},
		`{"key":"k","secret":"$env://JWT_SECRET","base64_secret":true}`:                                   {Key: "k", Secret: "$env://JWT_SECRET", Base64Secret: true, Algorithm: "HS256"},
		`{"key":"k","algorithm":"RS256","public_key":"$env://JWT_PUBLIC_KEY"}`:                            {Key: "k", PublicKey: "$env://JWT_PUBLIC_KEY", Algorithm: "RS256"},
	}
	for raw, want := range accepted {
		got, err := ParseConsumer([]byte(raw))
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: got %+v, want %+v", raw, *got, want)
		}
	}
	// TEST 46: ES256 with a public key.
	if _, err := ParseConsumer([]byte(`{"key":"user-key-es256","algorithm":"ES256","public_key":` + quote(es256PublicKey) + `}`)); err != nil {
		t.Errorf("ES256: %v", err)
	}
	refused := map[string]string{
		`{"secret":"s"}`:                              "key: is required",
		`{"key":"","secret":"s"}`:                     "key: must not be empty",
		`{"key":"k"}`:                                 `property "secret" is required when using HS based algorithms`,
		`{"key":"k","secret":""}`:                     "secret: must not be empty",
		`{"key":"k","secret":"s","x":1}`:              "x: unknown field",
		`{"key":"k","secret":"s","algorithm":"none"}`: `algorithm: must be one of "HS256"`,
		// TEST 42 "wrong format of secret".
		`{"key":"123","secret":"{^c0j4&]2!=J=","base64_secret":true}`: "base64_secret required but the secret is not in base64 format",
		// TEST 49, 50: missing public_key.
		`{"key":"user-key-res256","algorithm":"RS256"}`:                              `public_key: is required with algorithm "RS256"`,
		`{"key":"user-key-es256","algorithm":"ES256"}`:                               `public_key: is required with algorithm "ES256"`,
		`{"key":"k","algorithm":"RS256","public_key":"not a key"}`:                   "public_key: not a PEM public key for RS256",
		`{"key":"k","algorithm":"RS256","public_key":` + quote(es256PublicKey) + `}`: "public_key: not a PEM public key for RS256",
		`{"key":"k","secret":"s","exp":0}`:                                           "exp: must be an integer > 0, got 0",
		`{"key":"k","secret":"s","exp":60}`:                                          "exp: 60 is not supported yet",
		`{"key":"k","secret":"s","lifetime_grace_period":-1}`:                        "lifetime_grace_period: must be an integer from 0",
		`{"key":"k","secret":"s","private_key":"p"}`:                                 "private_key: gw signs no tokens",
		`{"key":"k","secret":"$secret://vault/jwt"}`:                                 "secret:",
	}
	for raw, want := range refused {
		if _, err := ParseConsumer([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", raw, err, want)
		}
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, "\n", `\n`) + `"` }

// Any consumer configuration ParseConsumer accepts indexes without panicking, and any
// route configuration Parse accepts serves a request.
func FuzzParseConsumer(f *testing.F) {
	for _, seed := range []string{
		`{"key":"user-key","secret":"my-secret-key","algorithm":"HS512","lifetime_grace_period":5}`,
		`{"key":"k","secret":"Zm9v","base64_secret":true}`,
		`{"key":"k","algorithm":"ES256","public_key":` + quote(es256PublicKey) + `}`,
		`{"key_claim_name":"iss","claims_to_verify":["nbf"],"hide_credentials":true}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := ParseConsumer([]byte(raw)); err == nil {
			newIndex(&conf.Snapshot{Consumers: []conf.Consumer{consumer("fuzz", raw)}})
		}
		if _, err := Parse([]byte(raw)); err == nil {
			j := instance(t, raw)
			c := plugins.AcquireCtx(request("/hello?jwt="+validToken, "Cookie", "jwt=x"), &plugins.RouteInfo{}, 0)
			_ = j.Access(c)
			plugins.ReleaseCtx(c)
		}
	})
}
