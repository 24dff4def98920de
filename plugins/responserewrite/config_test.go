package responserewrite

import (
	"gw/conf"
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	cases := map[string]func(*testing.T, *Config){
		`{}`: func(t *testing.T, c *Config) {
			if c.StatusCode != 0 || c.HasBody || c.MaxBodySize != 67108864 {
				t.Errorf("%+v", c)
			}
		},
		// t/plugin/response-rewrite.t TEST 1 "add plugin".
		`{"body":"new body\n","status_code":200,"headers":{"X-Server-id":3,"X-Server-status":"on"}}`: func(t *testing.T, c *Config) {
			if string(c.Body) != "new body\n" || c.StatusCode != 200 || len(c.Set) != 2 || c.Set[0].Name != "X-Server-id" || c.Set[0].Raw != "3" {
				t.Errorf("%+v", c)
			}
		},
		// TEST 12 "set body in base64".
		`{"body":"SGVsbG8K","body_base64":true}`: func(t *testing.T, c *Config) {
			if string(c.Body) != "Hello\n" {
				t.Errorf("body %q", c.Body)
			}
		},
		// TEST 25 "set empty body".
		`{"body":""}`: func(t *testing.T, c *Config) {
			if !c.HasBody || len(c.Body) != 0 {
				t.Errorf("%+v", c)
			}
		},
		// TEST 27 "test add header with one word".
		`{"headers":{"add":["X-Server-test:a"],"set":{"X-Id":"$remote_addr"},"remove":["Server"]}}`: func(t *testing.T, c *Config) {
			if len(c.Add) != 1 || c.Add[0].Name != "X-Server-test" || c.Add[0].Raw != "a" || len(c.Set) != 1 || c.Remove[0] != "Server" {
				t.Errorf("%+v", c)
			}
		},
		// TEST 23 "rewrite header with variables" (without $balancer_ip, which gw lacks).
		`{"headers":{"X-A":"$remote_addr","X-B":"from $remote_addr to ${host}"}}`: func(t *testing.T, c *Config) {
			if len(c.Set) != 2 || len(c.Set[1].Value.Parts) != 4 {
				t.Errorf("%+v", c.Set)
			}
		},
		`{"filters":[{"regex":"hello","replace":"$0 $$ ${0}1"},{"regex":"(?:a)b","scope":"global","replace":"x$1y","options":"jo"}],"max_resp_body_size":10}`: func(t *testing.T, c *Config) {
			if len(c.Filters) != 2 || c.Filters[0].Replace != "${0} $$ ${0}1" || !c.Filters[1].Global || c.Filters[1].Replace != "x${1}y" || c.MaxBodySize != 10 {
				t.Errorf("%+v", c.Filters)
			}
		},
		// TEST 16 "add validate vars"; response-rewrite3.t's, with the request's variables
		// and the response's headers.
		`{"vars":[["status","==",200]]}`: func(t *testing.T, c *Config) {
			if c.Vars == nil || c.Vars.Logic != conf.LogicAnd || len(c.Vars.Operands) != 1 || c.Vars.Operands[0].Cmp.Var.String() != "status" {
				t.Errorf("vars: %+v", c.Vars)
			}
		},
		`{"vars":[["sent_http_content_type","~~","^text/"],["arg_a","==","1"]],"body":"x"}`: func(t *testing.T, c *Config) {
			if c.Vars == nil || len(c.Vars.Operands) != 2 || c.Vars.Operands[0].Cmp.Var.String() != "sent_http_content_type" {
				t.Errorf("vars: %+v", c.Vars)
			}
		},
		`{"vars":[]}`: func(t *testing.T, c *Config) {
			if c.Vars != nil {
				t.Errorf("vars: %+v, want none (every response)", c.Vars)
			}
		},
		`{"filters":[{"regex":"HELLO","replace":"x","options":"i"}]}`: func(t *testing.T, c *Config) {
			if !c.Filters[0].Regex.MatchString("hello") {
				t.Error("options i: not caseless")
			}
		},
		`{"status_code":598,"_meta":{}}`: func(t *testing.T, c *Config) {},
	}
	for raw, check := range cases {
		t.Run(raw, func(t *testing.T) {
			c, err := Parse([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			check(t, c)
		})
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		`[]`: "must be a JSON object",
		// TEST 2 "add plugin with wrong status_code".
		`{"status_code":199}`:   "status_code: must be an integer from 200 to 598, got 199",
		`{"status_code":"200"}`: "status_code: must be an integer from 200 to 598",
		`{"body":1}`:            "body: must be a string, got 1",
		`{"body_base64":1}`:     "body_base64: must be a boolean",
		// TEST 10 "empty string in header field", TEST 11 "array in header value".
		`{"headers":{"":2}}`:                          "headers: invalid field length in header",
		`{"headers":{"X-Name":[]}}`:                   "headers.X-Name: invalid type as header value",
		`{"headers":[]}`:                              "headers: must be an object",
		`{"headers":{"X-Name":{}}}`:                   "headers.X-Name: invalid type as header value",
		`{"headers":{"X-Name":true}}`:                 "headers.X-Name: invalid type as header value",
		`{"headers":{}}`:                              "headers: must not be empty",
		`{"headers":{"a:b":"1"}}`:                     `headers: "a:b": a header name must not hold ':'`,
		`{"headers":{"X":"$nope"}}`:                   `headers.X: unknown variable "nope"`,
		`{"headers":{"X":"$balancer_ip"}}`:            `unknown variable "balancer_ip"`,
		`{"headers":{"add":[]}}`:                      `headers.add: must be a non-empty array`,
		`{"headers":{"add":["X-A"]}}`:                 `headers.add[0]: must be "Name: value"`,
		`{"headers":{"add":["X-A: http://x"]}}`:       `headers.add[0]: must be "Name: value"`,
		`{"headers":{"add":["X-A: a/"]}}`:             `headers.add[0]: must be "Name: value"`,
		`{"headers":{"set":{"X":[]}}}`:                "headers.set.X: invalid type as header value",
		`{"headers":{"remove":["a:b"]}}`:              `headers.remove[0]: must be a header name without ':'`,
		`{"headers":{"set":{"X":"1"},"X-Other":"2"}}`: "headers.X-Other: unknown field",
		// TEST 14 "set body with not well formed base64", TEST 21, 22: empty or no body.
		`{"body":"#$%","body_base64":true}`:                       "invalid base64 content",
		`{"body":"","body_base64":true}`:                          "invalid base64 content",
		`{"body_base64":true}`:                                    "invalid base64 content",
		`{"body":"x","filters":[{"regex":"a","replace":"b"}]}`:    "body: cannot be used with filters",
		`{"filters":[]}`:                                          "filters: must hold at least one filter",
		`{"filters":[{"replace":"b"}]}`:                           "filters[0].regex: is required",
		`{"filters":[{"regex":"a"}]}`:                             "filters[0].replace: is required",
		`{"filters":[{"regex":"","replace":"b"}]}`:                "filters[0].regex: must not be empty",
		`{"filters":[{"regex":"(","replace":"b"}]}`:               `filters[0].regex: "(" is not a regex RE2 compiles`,
		`{"filters":[{"regex":"a","replace":"$x"}]}`:              `filters[0].replace: a '$' must start $N, ${N} or $$, got "$x"`,
		`{"filters":[{"regex":"a","replace":"${x}"}]}`:            "filters[0].replace: ${...} must hold a capture number",
		`{"filters":[{"regex":"a","replace":"b","scope":"all"}]}`: `filters[0].scope: must be one of "once", "global"`,
		`{"filters":[{"regex":"a","replace":"b","options":"x"}]}`: `filters[0].options: option 'x' is not supported`,
		`{"filters":[{"regex":"a","replace":"b","x":1}]}`:         "filters[0].x: unknown field",
		`{"max_resp_body_size":0}`:                                "max_resp_body_size: must be an integer > 0",
		// TEST 17 "add plugin with invalidate vars", and variables gw cannot read.
		`{"vars":[[]]}`:                           "vars: failed to validate the 'vars' expression: rule too short",
		`{"vars":{"status":200}}`:                 "vars: failed to validate the 'vars' expression: must be an array",
		`{"vars":[["upstream_status","==",200]]}`: `vars: failed to validate the 'vars' expression: unknown variable "upstream_status"`,
		`{"vars":[["sent_http_","==","a"]]}`:      `invalid variable "sent_http_"`,
		`{"vars":[["status","~~","("]]}`:          "vars: failed to validate",
		`{"status":200}`:                          "status: unknown field",
	}
	for raw, want := range cases {
		t.Run(raw, func(t *testing.T) {
			_, err := Parse([]byte(raw))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want an error containing %q", err, want)
			}
		})
	}
}

// Any configuration Parse accepts rewrites a response, whole or streamed, without
// panicking.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"headers":{"add":["X-A: $remote_addr"],"set":{"X":3},"remove":["Server"]},"status_code":201}`,
		`{"filters":[{"regex":"(l+)","scope":"global","replace":"<$1>$$ ${0}","options":"ims"}],"max_resp_body_size":3}`,
		`{"body":"SGVsbG8=","body_base64":true,"headers":{"Content-Type":""}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := Parse([]byte(raw)); err != nil {
			return
		}
		serve(t, raw, upstreamAnswer{status: 200, body: "hello world\n"})
		serve(t, raw, upstreamAnswer{status: 200, body: "hello world\n", stream: true})
	})
}
