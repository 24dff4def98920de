package proxymirror

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParse holds every accept and reject of Parse; rows named TEST are
// t/plugin/proxy-mirror.t's.
func TestParse(t *testing.T) {
	cases := []struct {
		name, cfg string
		wantErr   string // "" accepts
		wantAddr  string
	}{
		{"TEST 1: invalid schema", `{"host":"ftp://127.0.0.1:1999"}`, `host: must be "http://" or "https://"`, ""},
		{"TEST 2: invalid port format", `{"host":"http://127.0.0.1::1999"}`, `host: must be "http://" or "https://"`, ""},
		{"TEST 3: without scheme", `{"host":"127.0.0.1:1999"}`, `host: must be "http://" or "https://"`, ""},
		{"TEST 4: without port", `{"host":"http://127.0.0.1"}`, "", "127.0.0.1:80"},
		{"TEST 5: include uri", `{"host":"http://127.0.0.1:1999/invalid_uri"}`, `host: must be "http://" or "https://"`, ""},
		{"TEST 6: normal case", `{"host":"http://127.0.0.1:1986"}`, "", "127.0.0.1:1986"},
		{"TEST 13: invalid sample_ratio", `{"host":"http://127.0.0.1:1986","sample_ratio":10}`, "sample_ratio: must be a number from 0.00001 to 1, got 10", ""},
		{"TEST 14: sample_ratio 1", `{"host":"http://127.0.0.1:1986","sample_ratio":1}`, "", "127.0.0.1:1986"},
		{"TEST 16: sample_ratio 0.5", `{"host":"http://127.0.0.1:1986","sample_ratio":0.5}`, "", "127.0.0.1:1986"},
		{"TEST 18: custom path", `{"host":"http://127.0.0.1:1986","path":"/a"}`, "", "127.0.0.1:1986"},
		{"TEST 21: path without /", `{"host":"http://127.0.0.1:1999","path":"a"}`, `path: must start with / and hold no ? or &, got "a"`, ""},
		{"TEST 21: path with a query", `{"host":"http://127.0.0.1:1999","path":"/a?a=c"}`, `path: must start with / and hold no ? or &, got "/a?a=c"`, ""},
		{"TEST 22: a short name", `{"host":"http://a"}`, "", "a:80"},
		{"TEST 22: a name", `{"host":"http://ab.com"}`, "", "ab.com:80"},
		{"TEST 22: IPv6", `{"host":"http://[::1]"}`, "", "[::1]:80"},
		{"TEST 22: IPv6 and port", `{"host":"http://[::1]:202"}`, "", "[::1]:202"},
		{"TEST 27: prefix", `{"host":"http://127.0.0.1:1986","path":"/a","path_concat_mode":"prefix"}`, "", "127.0.0.1:1986"},
		// gw's own.
		{"https", `{"host":"https://mirror.test"}`, "", "mirror.test:443"},
		{"grpc", `{"host":"grpc://127.0.0.1:1986"}`, `host: grpc mirrors are not supported yet, got "grpc://127.0.0.1:1986"`, ""},
		{"grpcs", `{"host":"grpcs://127.0.0.1:1986"}`, `host: grpcs mirrors are not supported yet`, ""},
		{"port 0", `{"host":"http://127.0.0.1:0"}`, `host: the port must be from 1 to 65535, got "http://127.0.0.1:0"`, ""},
		{"port too large", `{"host":"http://127.0.0.1:65536"}`, `host: the port must be from 1 to 65535`, ""},
		{"host required", `{"path":"/a"}`, "host: required", ""},
		{"host not a string", `{"host":1}`, "host: must be a string, got 1", ""},
		{"bad mode", `{"host":"http://a","path_concat_mode":"append"}`, `path_concat_mode: must be one of "replace", "prefix", got "append"`, ""},
		{"sample_ratio 0", `{"host":"http://a","sample_ratio":0}`, "sample_ratio: must be a number from 0.00001 to 1, got 0", ""},
		{"sample_ratio a string", `{"host":"http://a","sample_ratio":"0.5"}`, `sample_ratio: must be a number from 0.00001 to 1, got "0.5"`, ""},
		{"sample_ratio smallest", `{"host":"http://a","sample_ratio":0.00001}`, "", "a:80"},
		{"unknown field", `{"host":"http://a","hosts":[]}`, "hosts: unknown field; known fields: host, path, path_concat_mode, sample_ratio", ""},
		{"_meta", `{"host":"http://a","_meta":{}}`, "", "a:80"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(json.RawMessage(tc.cfg))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one starting %q", err, tc.wantErr)
			case err == nil && c.Addr != tc.wantAddr:
				t.Fatalf("addr %q, want %q", c.Addr, tc.wantAddr)
			}
		})
	}
}
