package cors

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	defaults := Config{AllowOrigins: "*", AllowMethods: "*", AllowHeaders: "*", MaxAge: 5}
	with := func(f func(*Config)) Config { c := defaults; f(&c); return c }
	cases := map[string]struct {
		raw  string
		want Config
	}{
		"empty": {`{}`, defaults},
		// t/plugin/cors.t TEST 1 "sanity": empty methods and headers are allowed.
		"sanity": {`{"allow_origins":"http://test.com","allow_methods":"","allow_headers":"","expose_headers":"","max_age":-1,"allow_credential":true}`,
			Config{AllowOrigins: "http://test.com", MaxAge: -1, AllowCredential: true}},
		"list":         {`{"allow_origins":"http://a.com,https://b.com:8443"}`, with(func(c *Config) { c.AllowOrigins = "http://a.com,https://b.com:8443" })},
		"force":        {`{"allow_origins":"**","allow_methods":"**","allow_headers":"**"}`, with(func(c *Config) { c.AllowOrigins, c.AllowMethods, c.AllowHeaders = "**", "**", "**" })},
		"null":         {`{"allow_origins":"null"}`, with(func(c *Config) { c.AllowOrigins = "null" })},
		"max_age 60.0": {`{"max_age":60.0}`, with(func(c *Config) { c.MaxAge = 60 })},
		"regex": {`{"allow_origins_by_regex":[".*\\.test\\.com$","^http://b"]}`,
			with(func(c *Config) { c.AllowOriginsByRegex = []string{`.*\.test\.com$`, "^http://b"} })},
		// t/plugin/cors.t TEST 4: "**" with credentials is allowed, "*" is not.
		"force with credential": {`{"allow_origins":"**","allow_methods":"**","allow_headers":"request-h","expose_headers":"expose-h","allow_credential":true}`,
			Config{AllowOrigins: "**", AllowMethods: "**", AllowHeaders: "request-h", ExposeHeaders: "expose-h", MaxAge: 5, AllowCredential: true}},
		"timing":       {`{"timing_allow_origins":"http://a.com"}`, with(func(c *Config) { c.TimingAllowOrigins = "http://a.com" })},
		"timing regex": {`{"timing_allow_origins_by_regex":["a"]}`, with(func(c *Config) { c.TimingAllowOriginsByRegex = []string{"a"} })},
		"_meta":        {`{"_meta":{"priority":1}}`, defaults},
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
		"unknown field": {`{"allow_origin":"*"}`, "allow_origin: unknown field"},
		// t/plugin/cors.t TEST 2 "wrong value of key": max_age as a string.
		"max_age string":        {`{"max_age":"5"}`, `max_age: must be an integer (seconds), got "5"`},
		"max_age float":         {`{"max_age":1.5}`, "max_age: must be an integer (seconds), got 1.5"},
		"origin no scheme":      {`{"allow_origins":"a.com"}`, `allow_origins: must be "*", "**", "null" or origins`},
		"origin trailing comma": {`{"allow_origins":"http://a.com,"}`, `allow_origins: must be`},
		"origins number":        {`{"allow_origins":1}`, "allow_origins: must be a string, got 1"},
		"methods number":        {`{"allow_methods":1}`, "allow_methods: must be a string, got 1"},
		"credential string":     {`{"allow_credential":"true"}`, `allow_credential: must be a boolean, got "true"`},
		// t/plugin/cors.t TEST 24-27: no '*' anywhere with allow_credential.
		"star origins with credential":    {`{"allow_origins":"*","allow_credential":true}`, string(errStarWithCredential.Error())},
		"star methods with credential":    {`{"allow_origins":"http://a.com","allow_methods":"*","allow_headers":"x","allow_credential":true}`, "you can not set '*'"},
		"star headers with credential":    {`{"allow_origins":"http://a.com","allow_methods":"GET","allow_headers":"*","allow_credential":true}`, "you can not set '*'"},
		"star expose with credential":     {`{"allow_origins":"http://a.com","allow_methods":"GET","allow_headers":"x","expose_headers":"*","allow_credential":true}`, "you can not set '*'"},
		"default origins with credential": {`{"allow_credential":true}`, "you can not set '*'"},
		"star timing with credential":     {`{"allow_origins":"**","allow_methods":"GET","allow_headers":"x","timing_allow_origins":"*","allow_credential":true}`, "you can not set '*'"},
		"regex empty list":                {`{"allow_origins_by_regex":[]}`, "allow_origins_by_regex: must hold at least one regex"},
		"regex not a list":                {`{"allow_origins_by_regex":"a"}`, `allow_origins_by_regex: must be an array of strings, got "a"`},
		"regex empty":                     {`{"allow_origins_by_regex":[""]}`, "allow_origins_by_regex[0]: must be 1 to 4096 bytes, got 0"},
		"regex twice":                     {`{"allow_origins_by_regex":["a","a"]}`, `allow_origins_by_regex[1]: "a" appears twice`},
		// RE2 has no lookahead: refused at the write, not failed at request time.
		"regex not RE2":       {`{"allow_origins_by_regex":["(?=a)b"]}`, `allow_origins_by_regex[0]: "(?=a)b" is not a regex RE2 compiles`},
		"timing regex broken": {`{"timing_allow_origins_by_regex":["("]}`, "timing_allow_origins_by_regex[0]"},
		"by metadata":         {`{"allow_origins_by_metadata":["company"]}`, "allow_origins_by_metadata: is not supported yet"},
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

// Any configuration Parse accepts builds and serves a request without panicking.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"allow_origins":"http://a.com,https://b.com","allow_methods":"**","allow_headers":"**","allow_credential":true}`,
		`{"allow_origins_by_regex":["\\.a\\.com$","^http://b"],"timing_allow_origins":"*","max_age":-1}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := Parse([]byte(raw)); err != nil {
			return
		}
		h := instance(t, raw)
		serve(t, h, "OPTIONS", []string{"Origin", "http://x.a.com", "Access-Control-Request-Headers", "a"})
	})
}
