package faultinjection

import (
	"strings"
	"testing"
	"time"
)

func TestParseAccepts(t *testing.T) {
	for _, raw := range []string{
		// t/plugin/fault-injection.t TEST 10, 12, 14, 22, 24.
		`{"delay":{"duration":1}}`,
		`{"abort":{"http_status":200,"body":"Fault Injection!\n"}}`,
		`{"abort":{"http_status":405,"body":"Fault Injection!\n"}}`,
		`{"abort":{"http_status":200,"body":"client addr: $remote_addr\n"}}`,
		`{"abort":{"http_status":200}}`,
		// TEST 18, 20: zero percentage.
		`{"abort":{"http_status":200,"body":"x","percentage":0}}`,
		`{"delay":{"duration":1,"percentage":0}}`,
		// TEST 26 "vars schema validation passed".
		`{"abort":{"http_status":403,"body":"Fault Injection!\n","vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]},` +
			`"delay":{"duration":2,"vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]}}`,
		`{"abort":{"http_status":503,"headers":{"X-Fault":"on $host","Retry-After":5}}}`,
		`{"abort":{"http_status":503,"body":"$nope","vars":[]}}`,
		`{"delay":{"duration":0.25},"abort":{"http_status":599,"percentage":100},"_meta":{}}`,
		`{"delay":{"duration":3600}}`,
	} {
		if _, err := Parse([]byte(raw)); err != nil {
			t.Errorf("Parse(%s): %v", raw, err)
		}
	}
	c, _ := Parse([]byte(`{"delay":{"duration":0.25}}`))
	if c.Delay.Duration != 250*time.Millisecond {
		t.Errorf("duration 0.25 = %v", c.Delay.Duration)
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		// t/plugin/fault-injection.t TEST 1 "invalid http_status in the abort property".
		"status low": {`{"abort":{"http_status":100,"body":"x"}}`, "abort.http_status: must be an integer from 200 to 599, got 100"},
		// TEST 2 "without http_status in the abort property".
		"no status": {`{"abort":{"body":"x"}}`, "abort.http_status: is required"},
		// TEST 3 "without abort & delay properties".
		"empty": {`{}`, "configuration must set abort, delay or both"},
		// TEST 4 "without duration in the delay property".
		"no duration": {`{"delay":{"percentage":10}}`, "delay.duration: is required"},
		// TEST 5, 6, 7: invalid durations.
		"duration string": {`{"delay":{"duration":"1"}}`, `delay.duration: must be a number of seconds, got "1"`},
		"duration dots":   {`{"delay":{"duration":1.1.1}}`, "invalid JSON"},
		"negative":        {`{"delay":{"duration":-1}}`, "delay.duration: must be from 0 to 3600 seconds, got -1"},
		"too long":        {`{"delay":{"duration":3601}}`, "delay.duration: must be from 0 to 3600 seconds"},
		// TEST 8, 9: vars not an array of arrays.
		"vars object":  {`{"delay":{"duration":0.1,"vars":{"a":"b"}}}`, "delay.vars: must be an array of vars expressions"},
		"vars strings": {`{"abort":{"http_status":200,"vars":["a","b"]}}`, `abort.vars: item 1 must be an array (a vars expression), got "a"`},
		// TEST 27 "vars schema validation failed(abort failed)".
		"unwrapped rule":   {`{"abort":{"http_status":403,"vars":[["arg_name","!=","jack"]]}}`, "abort.vars: item 1: failed to validate the 'vars' expression: rule should be wrapped inside brackets"},
		"bad operator":     {`{"abort":{"http_status":403,"vars":[[["arg_name","=","jack"]]]}}`, "abort.vars: item 1: failed to validate the 'vars' expression: invalid operator"},
		"too many vars":    {`{"delay":{"duration":1,"vars":[` + strings.Repeat(`[],`, 20) + `[]]}}`, "delay.vars: must have at most 20 expressions, got 21"},
		"percentage high":  {`{"abort":{"http_status":200,"percentage":101}}`, "abort.percentage: must be an integer from 0 to 100, got 101"},
		"percentage float": {`{"delay":{"duration":1,"percentage":0.5}}`, "delay.percentage: must be an integer from 0 to 100"},
		"body number":      {`{"abort":{"http_status":200,"body":1}}`, "abort.body: must be a string, got 1"},
		"body bad var":     {`{"abort":{"http_status":200,"body":"${post_arg.x[0}"}}`, "abort.body: invalid variable"},
		"headers empty":    {`{"abort":{"http_status":200,"headers":{}}}`, "abort.headers: must not be empty"},
		"header colon":     {`{"abort":{"http_status":200,"headers":{"X:A":"1"}}}`, `abort.headers: "X:A": a header name must not be empty or hold ':'`},
		"header bool":      {`{"abort":{"http_status":200,"headers":{"X-A":true}}}`, "abort.headers.X-A: must be a string or a number, got true"},
		"header newline":   {`{"abort":{"http_status":200,"headers":{"X-A":"a\r\nb: c"}}}`, "abort.headers.X-A: a header value must not hold a line break"},
		"abort extra":      {`{"abort":{"http_status":200,"status":1}}`, "abort.status: unknown field"},
		"delay extra":      {`{"delay":{"duration":1,"body":"x"}}`, "delay.body: unknown field"},
		"abort not object": {`{"abort":true}`, "abort: configuration must be a JSON object"},
		"unknown":          {`{"abort":{"http_status":200},"redirect":{}}`, "redirect: unknown field"},
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
