package iprestriction

import (
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct{ raw, wantBody string }{
		// t/plugin/ip-restriction.t TEST 1 "sanity": the defaults.
		{`{"whitelist":["10.255.254.0/24","192.168.0.0/16"]}`, `{"message":"Your IP address is not allowed"}`},
		// TEST 19 "sanity(IPv6)".
		{`{"whitelist":["::1","fe80::/32","2001:db8::/32"]}`, ""},
		{`{"blacklist":["127.0.0.1"]}`, ""},
		// TEST 26 "set blacklist and user-defined message".
		{`{"blacklist":["127.0.0.0/24"],"message":"Do you want to do something bad?"}`, `{"message":"Do you want to do something bad?"}`},
		// TEST 33 "set whitelist and 404 response code".
		{`{"whitelist":["1.1.1.1"],"response_code":404}`, ""},
		{`{"whitelist":["1.1.1.1"],"message":"` + strings.Repeat("é", 1024) + `"}`, ""},
		{`{"whitelist":["1.1.1.1"],"message":"a \"quoted\" <b>"}`, `{"message":"a \"quoted\" \u003cb\u003e"}`},
		{`{"blacklist":["10.1.2.3/8"],"_meta":{"disable":false}}`, ""},
	} {
		c, err := Parse([]byte(tc.raw))
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.raw, err)
			continue
		}
		if tc.wantBody != "" && string(c.Body) != tc.wantBody+"\n" {
			t.Errorf("Parse(%s): body %q, want %q", tc.raw, c.Body, tc.wantBody+"\n")
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		// t/plugin/ip-restriction.t TEST 2 and 3 "wrong CIDR v4 format".
		"bad octet":  {`{"whitelist":["10.255.256.0/24","192.168.0.0/16"]}`, `whitelist: item 1: invalid ip address: must be an IPv4 or IPv6 address or CIDR, got "10.255.256.0/24"`},
		"bad length": {`{"whitelist":["10.255.254.0/38"]}`, `whitelist: item 1: invalid ip address`},
		// TEST 4 "empty conf".
		"empty": {`{}`, "configuration must set one of whitelist or blacklist"},
		// TEST 5 "empty CIDRs".
		"empty list": {`{"blacklist":[]}`, "blacklist: must have at least 1 item(s), got 0"},
		// TEST 6 "whitelist and blacklist mutual exclusive".
		"both": {`{"whitelist":["172.17.40.0/24"],"blacklist":["10.255.0.0/16"]}`, "set one of them, not both"},
		// TEST 24 "wrong IPv6 format".
		"bad v6": {`{"whitelist":["::1/129"]}`, `whitelist: item 1: invalid ip address`},
		"zone":   {`{"whitelist":["fe80::1%eth0"]}`, `whitelist: item 1: invalid ip address`},
		// TEST 31 and 32: message length.
		"message empty":    {`{"whitelist":["1.1.1.1"],"message":""}`, "message: must not be empty"},
		"message too long": {`{"whitelist":["1.1.1.1"],"message":"` + strings.Repeat("a", 1025) + `"}`, "message: must be at most 1024 characters, got 1025"},
		"code 401":         {`{"whitelist":["1.1.1.1"],"response_code":401}`, "response_code: must be an integer from 403 to 404, got 401"},
		"code string":      {`{"whitelist":["1.1.1.1"],"response_code":"403"}`, "response_code: must be an integer"},
		"item number":      {`{"whitelist":[1]}`, "whitelist: item 1 must be a string, got 1"},
		"not array":        {`{"whitelist":"1.1.1.1"}`, "whitelist: must be an array of strings"},
		"unknown":          {`{"whitelist":["1.1.1.1"],"allow":true}`, "allow: unknown field"},
		"not object":       {`[]`, "configuration must be a JSON object"},
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
