package tcplogger

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	c, err := Parse(json.RawMessage(`{"host":"127.0.0.1","port":5044}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:5044" || c.Timeout != time.Second || c.TLS || c.Batch.Name != "tcp logger" || c.Batch.BatchMaxSize != 1000 {
		t.Errorf("defaults = %+v", c)
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"host":"::1","port":1,"tls":true,"tls_options":"logs.example","timeout":500,"include_req_body":true,"batch_max_size":1}`, ""},
		{`{"host":"a","port":1,"log_format":{"h":"$host"}}`, ""},
		{`{"port":1}`, "host: required"},
		{`{"host":"a"}`, "port: required"},
		{`{"host":"a","port":0}`, "port: must be an integer from 1 to 65535, got 0"},
		{`{"host":"a","port":1,"timeout":0}`, "timeout: must be an integer from 1 to 86400000, got 0"},
		{`{"host":"a","port":1,"tls":1}`, "tls: must be true or false, got 1"},
		{`{"host":"a","port":1,"include_resp_body":true}`, "include_resp_body: is not supported yet"},
		{`{"host":"a","port":1,"x":1}`, "x: unknown field; known fields: " + fields},
	} {
		_, err := Parse(json.RawMessage(tc.raw))
		if got := fmt.Sprint(err); (tc.want == "") != (err == nil) || (err != nil && got != tc.want) {
			t.Errorf("Parse(%s) = %v, want %q", tc.raw, err, tc.want)
		}
	}
}
