package proxyrewrite

import (
	"strings"
	"testing"

	"gw/plugins"
)

func TestParseAccepts(t *testing.T) {
	for _, raw := range []string{
		`{"uri":"/api/values"}`,
		`{"uri":"/a?x=1"}`,
		`{"uri":"/$route_id/$consumer_name/${http_x ?? none}"}`,
		`{"uri":"/$uri/${arg_id}/$http_x_user/$cookie_s/$host/$remote_addr/$args/$request_method/$scheme/$request_uri/$query_string"}`,
		`{"uri":"/cost$"}`,
		`{"regex_uri":["^/hello/(.*)","/$1"]}`,
		`{"regex_uri":["^/a/(.*)","/b/${1}x","^/c","/d"]}`,
		`{"regex_uri":["^/(a)","/$$1$0"]}`,
		`{"host":"example.com"}`,
		`{"host":"a-b.c:8080"}`,
		`{"method":"POST"}`,
		`{"method":"PROPFIND"}`,
		`{"headers":{"X-Api":"v2","X-Num":1.5}}`,
		`{"headers":{"set":{"X-A":"1","X-B":["a","b"]},"add":{"X-C":2},"remove":["User-Agent"]}}`,
		`{"headers":{"set":{"X-Cap":"$1-$uri"}},"regex_uri":["^/(.*)","/$1"]}`,
		// APISIX resolves an unknown variable in a header value to nothing.
		`{"headers":{"X-A":"$nope"}}`,
		`{"headers":{"set":{"X-A":"${helle ?? x}"},"add":{"X-B":"$http_"}}}`,
		`{"headers":{"X-Api-Test":""}}`,
		`{"uri":"/a","use_real_request_uri_unsafe":false}`,
		// t/plugin/proxy-rewrite3.t TEST 8: use_real_request_uri_unsafe alone.
		`{"use_real_request_uri_unsafe":true}`,
		`{"uri":"/a?x=$arg_x","use_real_request_uri_unsafe":true}`,
		`{"uri":"/a","_meta":{}}`,
		// APISIX's minProperties = 1: any property will do, even one that changes nothing.
		`{"use_real_request_uri_unsafe":false}`,
		`{"_meta":{"disable":false}}`,
	} {
		if _, err := Parse([]byte(raw)); err != nil {
			t.Errorf("Parse(%s): %v", raw, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		"empty":                {`{}`, "must set at least one of"},
		"not an object":        {`"x"`, "must be a JSON object"},
		"unknown field":        {`{"url":"/a"}`, "url: unknown field"},
		"scheme":               {`{"scheme":"https"}`, "scheme: removed in APISIX 3.0"},
		"uri relative":         {`{"uri":"a"}`, `uri: must start with "/"`},
		"uri empty":            {`{"uri":""}`, "uri: must not be empty"},
		"uri too long":         {`{"uri":"/` + strings.Repeat("a", 4096) + `"}`, "at most 4096"},
		"uri unknown variable": {`{"uri":"/$upstream_addr"}`, `uri: unknown variable "upstream_addr"; supported: uri,`},
		"uri dotted variable":  {`{"uri":"/$uri.html"}`, `uri: unknown variable "uri.html"`},
		"uri capture":          {`{"uri":"/$1"}`, "$1: captures are filled by regex_uri"},
		"regex_uri one item":   {`{"regex_uri":["^/a"]}`, "must hold pairs"},
		"regex_uri odd":        {`{"regex_uri":["a","b","c"]}`, "must hold pairs"},
		"regex_uri not array":  {`{"regex_uri":"^/a"}`, "regex_uri: must be an array"},
		"regex_uri number":     {`{"regex_uri":["^/a",1]}`, "item 2 must be a string"},
		"regex_uri bad regex":  {`{"regex_uri":["^/(a","/b"]}`, "invalid regex_uri(^/(a, /b)"},
		"regex_uri lookahead":  {`{"regex_uri":["^/(?=a)","/b"]}`, "RE2 syntax"},
		"replacement capture":  {`{"regex_uri":["^/(a)","/$2"]}`, "only 1 capture"},
		"replacement variable": {`{"regex_uri":["^/(a)","/$uri"]}`, "invalid capturing variable name"},
		"replacement lone $":   {`{"regex_uri":["^/(a)","/$"]}`, "invalid capturing variable name"},
		"host with path":       {`{"host":"a.com/x"}`, "host: must be a host name"},
		"host with bad port":   {`{"host":"a.com:123456"}`, "host: must be a host name"},
		"host empty port":      {`{"host":"a.com:"}`, "host: must be a host name"},
		"host underscore":      {`{"host":"a_b.com"}`, "host: must be a host name"},
		"method lowercase":     {`{"method":"get"}`, "method: must be one of"},
		"method number":        {`{"method":1}`, "method: must be a string"},
		"unsafe not a boolean": {`{"use_real_request_uri_unsafe":"yes"}`, "use_real_request_uri_unsafe"},
		"headers empty":        {`{"headers":{}}`, "headers: must not be empty"},
		"headers not object":   {`{"headers":[]}`, "headers: configuration must be a JSON object"},
		"flat header bool":     {`{"headers":{"X-A":true}}`, "headers.X-A: must be a string or a number"},
		"flat header array":    {`{"headers":{"X-A":["a"]}}`, "headers.X-A: must be a string or a number"},
		"header name colon":    {`{"headers":{"X:A":"1"}}`, "invalid field character"},
		"header name space":    {`{"headers":{"set":{"X A":"1"}}}`, "invalid field character"},
		"header value newline": {`{"headers":{"X-A":"a\nb"}}`, "invalid value character"},
		"set empty":            {`{"headers":{"set":{}}}`, "headers.set: must not be empty"},
		"set empty array":      {`{"headers":{"set":{"X-A":[]}}}`, "non-empty array"},
		"add nested":           {`{"headers":{"add":{"X-A":{"b":1}}}}`, "must be a string or a number"},
		"remove empty":         {`{"headers":{"remove":[]}}`, "headers.remove: must be a non-empty array"},
		"remove number":        {`{"headers":{"remove":[1]}}`, "item 1 must be a string"},
		"structured extra":     {`{"headers":{"set":{"X-A":"1"},"X-B":"2"}}`, "headers.X-B: unknown field"},
		"header post_arg":      {`{"headers":{"X-A":"${post_arg.x[0}"}}`, `headers.X-A: invalid variable "post_arg.x[0": the '[' at offset 1 is not closed`},
		"header capture range": {`{"headers":{"X-A":"$100"}}`, `headers.X-A: $100: capture number out of range`},
		"field twice":          {`{"uri":"/a","uri":"/b"}`, "uri: appears twice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// FuzzParse: no configuration panics Parse, and an accepted one never panics Access.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"uri":"/a/$arg_x?y=${http_z}"}`,
		`{"regex_uri":["^/(a+)(b)?","/$2${1}$$"],"headers":{"set":{"X":"$1 $3"}}}`,
		`{"headers":{"add":{"X":["a",1]},"remove":["Y"]},"host":"h:1","method":"GET"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := Parse([]byte(raw))
		if err != nil {
			return
		}
		ctx := serverRequest(t, "GET /ab/c?x=1 HTTP/1.1\r\nHost: gw\r\nZ: q?\r\n\r\n")
		pc := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
		c.Access(pc)
		plugins.ReleaseCtx(pc)
	})
}
