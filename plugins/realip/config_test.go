package realip

import (
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	for _, raw := range []string{
		// t/plugin/real-ip.t TEST 2, 14, 18, 22.
		`{"source":"http_xff"}`,
		`{"source":"http_x_forwarded_for"}`,
		`{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16"]}`,
		`{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","127.0.0.0/24"],"recursive":true}`,
		`{"source":"arg_realip","trusted_addresses":["::1","fe80::/10"],"_meta":{}}`,
		`{"source":"cookie_client"}`,
	} {
		if _, err := Parse([]byte(raw)); err != nil {
			t.Errorf("Parse(%s): %v", raw, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		// t/plugin/real-ip.t TEST 1 "schema check".
		"no source":        {`{}`, "source: is required"},
		"bad v4":           {`{"source":"http_xff","trusted_addresses":["127.0.0.1/33"]}`, "trusted_addresses: item 1: invalid ip address"},
		"bad v6":           {`{"source":"http_xff","trusted_addresses":["::1/129"]}`, "trusted_addresses: item 1: invalid ip address"},
		"empty list":       {`{"source":"http_xff","trusted_addresses":[]}`, "trusted_addresses: must have at least 1 item(s)"},
		"source empty":     {`{"source":""}`, "source: must not be empty"},
		"source unknown":   {`{"source":"upstream_addr"}`, `source: unknown variable "upstream_addr"`},
		"recursive string": {`{"source":"http_xff","recursive":"true"}`, "recursive: must be a boolean"},
		"unknown":          {`{"source":"http_xff","header":"x"}`, "header: unknown field"},
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
