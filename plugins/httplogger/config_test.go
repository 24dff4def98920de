package httplogger

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	c, err := Parse(json.RawMessage(`{"uri":"http://127.0.0.1:1980/log"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 3*time.Second || c.NewLine || c.SSLVerify || c.Batch.BatchMaxSize != 1000 ||
		c.Batch.InactiveTimeout != 5*time.Second || c.Batch.BufferDuration != 60*time.Second || c.Format != nil {
		t.Errorf("defaults = %+v", c)
	}
	for _, tc := range []struct {
		raw, want string // want "" accepted
	}{
		{`{"uri":"https://log.example/x","auth_header":"Basic YQ==","timeout":1,"concat_method":"new_line","ssl_verify":true,"include_req_body":true,"include_resp_body":true}`, ""},
		{`{"uri":"http://127.0.0.1/","batch_max_size":1,"inactive_timeout":1,"buffer_duration":1,"max_retry_count":3,"retry_delay":0,"name":"b"}`, ""},
		{`{"uri":"http://127.0.0.1/","log_format":{"host":"$host","client_ip":"$remote_addr","x":"text"}}`, ""},
		{`{"uri":"http://127.0.0.1/","_meta":{}}`, ""},
		{`{}`, "uri: required"},
		{`{"uri":""}`, "uri: must not be empty"},
		{`{"uri":"ftp://a/"}`, `uri: must be an http:// or https:// URL with a host, got "ftp://a/"`},
		{`{"uri":"/log"}`, `uri: must be an http:// or https:// URL with a host, got "/log"`},
		{`{"uri":"http://a/","timeout":0}`, "timeout: must be an integer from 1 to 86400, got 0"},
		{`{"uri":"http://a/","concat_method":"csv"}`, `concat_method: must be one of "json", "new_line", got "csv"`},
		{`{"uri":"http://a/","ssl_verify":"yes"}`, `ssl_verify: must be true or false, got "yes"`},
		{`{"uri":"http://a/","batch_max_size":0}`, "batch_max_size: must be an integer from 1 to 1000000, got 0"},
		{`{"uri":"http://a/","log_format":{"a":"$nope"}}`, `log_format.a: unknown variable "nope"; supported: uri, request_uri, args, query_string, host, hostname, server_name, remote_addr, remote_port, server_addr, server_port, request_method, scheme, route_id, route_name, service_id, service_name, consumer_name, mqtt_client_id, time_iso8601, http_<name>, arg_<name>, cookie_<name>, post_arg_<name>, post_arg.<path>, status, sent_http_<name>`},
		{`{"uri":"http://a/","log_format":{"a":1}}`, "log_format.a: must be a string, got 1"},
		{`{"uri":"http://a/","log_format":"x"}`, `log_format: must be an object, got "x"`},
		{`{"uri":"http://a/","include_resp_body_expr":[]}`, "include_resp_body_expr: is not supported yet"},
		{`{"uri":"http://a/","include_req_body_expr":[]}`, "include_req_body_expr: is not supported yet"},
		{`{"uri":"http://a/","request_header_keys":[]}`, "request_header_keys: is not supported yet"},
		{`{"uri":"http://a/","urls":[]}`, "urls: unknown field; known fields: " + fields},
	} {
		_, err := Parse(json.RawMessage(tc.raw))
		if got := fmt.Sprint(err); (tc.want == "") != (err == nil) || (err != nil && got != tc.want) {
			t.Errorf("Parse(%s) = %v, want %q", tc.raw, err, tc.want)
		}
	}
}

func TestValidateMetadata(t *testing.T) {
	for raw, want := range map[string]string{
		`{}`: "",
		`{"log_format":{"host":"$host","@timestamp":"$time_iso8601"},"create_time":1,"update_time":2}`: "",
		`{"log_format":{"a":"$unknown_var"}}`: `log_format.a: unknown variable "unknown_var"`,
		`{"log_format":[]}`:                   "log_format: must be an object, got []",
		`{"format":{}}`:                       "format: unknown field; known fields: log_format",
	} {
		err := plugin{}.ValidateMetadata(json.RawMessage(raw))
		got := fmt.Sprint(err)
		if (want == "") != (err == nil) || (err != nil && got[:min(len(got), len(want))] != want) {
			t.Errorf("ValidateMetadata(%s) = %v, want %q", raw, err, want)
		}
	}
}
