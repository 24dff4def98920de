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
		"metadata empty list": {`{"allow_origins_by_metadata":[]}`, "allow_origins_by_metadata: must hold at least one name"},
		"metadata not a list": {`{"allow_origins_by_metadata":"key_1"}`, `allow_origins_by_metadata: must be an array of strings, got "key_1"`},
		"metadata empty name": {`{"allow_origins_by_metadata":[""]}`, "allow_origins_by_metadata[0]: must be 1 to 4096 bytes, got 0"},
		"metadata name twice": {`{"allow_origins_by_metadata":["a","a"]}`, `allow_origins_by_metadata[1]: "a" appears twice`},
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

// cors's plugin_metadata: t/plugin/cors3.t TEST 1's good and bad origin lists, strictly.
func TestParseMetadata(t *testing.T) {
	good := `{"allow_origins":{"key_1":"*","key_2":"**","key_3":"null","key_4":"http://y.com.uk","key_5":"https://x.com",` +
		`"key_6":"https://x.com,http://y.com.uk","key_8":"https://x.com,http://y.com.uk:12000,http://c.tv"},"create_time":1,"update_time":2}`
	md, err := ParseMetadata([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(md.AllowOrigins) != 7 || md.AllowOrigins["key_6"] != "https://x.com,http://y.com.uk" {
		t.Errorf("allow_origins %v", md.AllowOrigins)
	}
	for _, bad := range []string{"", "*a", "*,http://y.com", "nulll", "http//y.com.uk", "x.com", "https://x.com,y.com.uk",
		"https://x.com,*,https://y.com.uk", "https://x.com,http://y.com.uk,http:c.tv"} {
		_, err := ParseMetadata([]byte(`{"allow_origins":{"key":"` + bad + `"}}`))
		if err == nil || !strings.Contains(err.Error(), "allow_origins.key: must be") {
			t.Errorf("%q: %v, want allow_origins.key refused", bad, err)
		}
	}
	for raw, want := range map[string]string{
		`{"allow_origins":"https://x.com"}`:        `allow_origins: must be an object of named origin lists, got "https://x.com"`,
		`{"allow_origins":{"k":1}}`:                `allow_origins.k: must be a string`,
		`{"inactive_timeout":1}`:                   "inactive_timeout: unknown field; known fields: allow_origins",
		`{"allow_origins":{},"create_time":"now"}`: `create_time: must be an integer, got "now"`,
	} {
		if _, err := ParseMetadata([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
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
