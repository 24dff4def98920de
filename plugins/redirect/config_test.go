package redirect

import (
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	for _, raw := range []string{
		// t/plugin/redirect.t TEST 1 "sanity", TEST 2 "default ret_code".
		`{"uri":"/foo","ret_code":301}`,
		`{"uri":"/foo"}`,
		`{"uri":"$uri/test/add","ret_code":301}`,
		`{"uri":"$uri/test/a${arg_name}c"}`,
		`{"uri":"/foo$$uri"}`,
		`{"uri":"\\$uri/foo$uri\\$uri/bar","ret_code":301}`,
		// TEST 15, 23 http_to_https (ret_code is ignored then).
		`{"http_to_https":true}`,
		`{"http_to_https":true,"ret_code":302}`,
		// TEST 34, 37.
		`{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301}`,
		`{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301,"encode_uri":true}`,
		`{"regex_uri":["^/(a)(b)?","/$2$1$$0$0"]}`,
		// TEST 41, 43.
		`{"uri":"$uri","ret_code":302,"append_query_string":true}`,
		`{"uri":"$uri?type=string","ret_code":302,"append_query_string":true,"_meta":{}}`,
		`{"http_to_https":false}`,
	} {
		if _, err := Parse([]byte(raw)); err != nil {
			t.Errorf("Parse(%s): %v", raw, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		"none": {`{"ret_code":301}`, "configuration must set one of uri, regex_uri or http_to_https"},
		// t/plugin/redirect.t TEST 25 "wrong configure, enable http_to_https with uri".
		"https and uri": {`{"http_to_https":true,"uri":"/hello"}`, "http_to_https and uri: set one of uri, regex_uri and http_to_https, not several"},
		"uri and regex": {`{"uri":"/a","regex_uri":["^/a","/b"]}`, "uri and regex_uri: set one of"},
		// TEST 48 "wrong configure, enable http_to_https with append_query_string".
		"https and query": {`{"http_to_https":true,"append_query_string":true}`, "only one of `http_to_https` and `append_query_string` can be configured."},
		"uri short":       {`{"uri":"/"}`, `uri: must be at least 2 characters, got "/"`},
		"uri number":      {`{"uri":1}`, "uri: must be a string"},
		// TEST 13: APISIX resolves $bad_var to nothing; gw refuses what it cannot read.
		"unknown variable": {`{"uri":"$uri/$bad_var/bar"}`, `uri: unknown variable "bad_var"`},
		"dotted variable":  {`{"uri":"$uri.html"}`, `uri: unknown variable "uri.html"`},
		"regex one":        {`{"regex_uri":["^/a"]}`, "regex_uri: must be [regex, replacement], got 1 item(s)"},
		"regex three":      {`{"regex_uri":["^/a","/b","/c"]}`, "regex_uri: must be [regex, replacement], got 3 item(s)"},
		"regex bad":        {`{"regex_uri":["^/(a","/b"]}`, "regex_uri: invalid regex_uri (^/(a, /b), err:"},
		"regex lookahead":  {`{"regex_uri":["^/(?=a)","/b"]}`, "RE2 syntax"},
		"capture range":    {`{"regex_uri":["^/(a)","/$2"]}`, "$2: the regex has only 1 capture(s)"},
		"capture braces":   {`{"regex_uri":["^/(a)","/${2}"]}`, "${2}: the regex has only 1 capture(s)"},
		"variable in repl": {`{"regex_uri":["^/(a)","/$uri"]}`, "invalid capturing variable name"},
		"lone dollar":      {`{"regex_uri":["^/(a)","/$"]}`, "invalid capturing variable name"},
		"regex number":     {`{"regex_uri":["^/a",1]}`, "regex_uri: item 2 must be a string"},
		"code low":         {`{"uri":"/a","ret_code":199}`, "ret_code: must be an integer from 200 to 599, got 199"},
		"https string":     {`{"http_to_https":"true"}`, "http_to_https: must be a boolean"},
		"encode string":    {`{"uri":"/a","encode_uri":1}`, "encode_uri: must be a boolean"},
		"unknown":          {`{"uri":"/a","https_port":443}`, "https_port: unknown field"},
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
