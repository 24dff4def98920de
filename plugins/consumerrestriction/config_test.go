package consumerrestriction

import (
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	for _, raw := range []string{
		`{"whitelist":["jack1","jack2"]}`,
		// t/plugin/consumer-restriction.t TEST 2 "blacklist > whitelist > allowed_by_methods".
		`{"whitelist":["jack1"],"blacklist":["jack2"],"allowed_by_methods":[]}`,
		// TEST 21, 23 "set allowed_by_methods".
		`{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`,
		`{"allowed_by_methods":[{"user":"jack1","methods":["POST","GET"]}]}`,
		// TEST 37 and 48: service_id and route_id.
		`{"type":"service_id","whitelist":["1"],"rejected_code":401}`,
		`{"type":"route_id","blacklist":["1"],"rejected_msg":"no"}`,
		`{"type":"consumer_name","blacklist":["x"],"rejected_msg":"","_meta":{}}`,
	} {
		if _, err := Parse([]byte(raw)); err != nil {
			t.Errorf("Parse(%s): %v", raw, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		"empty":            {`{}`, "configuration must set at least one of whitelist, blacklist or allowed_by_methods"},
		"only type":        {`{"type":"route_id"}`, "must set at least one of"},
		"empty whitelist":  {`{"whitelist":[]}`, "whitelist: must have at least 1 item(s), got 0"},
		"number in list":   {`{"blacklist":["a",2]}`, "blacklist: item 2 must be a string, got 2"},
		"bad type":         {`{"type":"consumer","whitelist":["a"]}`, `type: must be one of`},
		"group":            {`{"type":"consumer_group_id","whitelist":["a"]}`, `type: "consumer_group_id" is not supported yet`},
		"bad method":       {`{"allowed_by_methods":[{"user":"a","methods":["get"]}]}`, `allowed_by_methods[1].methods: item 1: must be one of GET, POST`},
		"no methods":       {`{"allowed_by_methods":[{"user":"a"}]}`, `allowed_by_methods[1]: must set both user and methods`},
		"no user":          {`{"allowed_by_methods":[{"user":"a","methods":["GET"]},{"methods":["GET"]}]}`, `allowed_by_methods[2]: must set both user and methods`},
		"empty methods":    {`{"allowed_by_methods":[{"user":"a","methods":[]}]}`, `allowed_by_methods[1].methods: must have at least 1 item(s)`},
		"item extra":       {`{"allowed_by_methods":[{"user":"a","methods":["GET"],"hosts":[]}]}`, `allowed_by_methods[1].hosts: unknown field`},
		"item not object":  {`{"allowed_by_methods":["a"]}`, `allowed_by_methods[1]: configuration must be a JSON object`},
		"not array":        {`{"allowed_by_methods":{}}`, `allowed_by_methods: must be an array`},
		"user number":      {`{"allowed_by_methods":[{"user":1,"methods":["GET"]}]}`, `allowed_by_methods[1].user: must be a string, got 1`},
		"code low":         {`{"whitelist":["a"],"rejected_code":100}`, "rejected_code: must be an integer from 200 to 599, got 100"},
		"msg not a string": {`{"whitelist":["a"],"rejected_msg":1}`, "rejected_msg: must be a string"},
		// APISIX's schema takes any other member (TEST 1's "title"); gw's decoders are strict.
		"unknown field": {`{"title":"whitelist","whitelist":["a"]}`, "title: unknown field"},
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
