package syslog

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	c, err := Parse(json.RawMessage(`{"host":"127.0.0.1","port":514}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:514" || c.UDP || c.TLS || c.Timeout != 3*time.Second || c.Batch.Name != "sys logger" {
		t.Errorf("defaults = %+v", c)
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"host":"a","port":1,"sock_type":"udp","timeout":100,"batch_max_size":1,"log_format":{"h":"$host"}}`, ""},
		{`{"host":"a","port":1,"tls":true}`, ""},
		{`{"port":1}`, "host: required"},
		{`{"host":"a"}`, "port: required"},
		{`{"host":"a","port":1,"sock_type":"unix"}`, `sock_type: must be one of "tcp", "udp", got "unix"`},
		{`{"host":"a","port":1,"sock_type":"udp","tls":true}`, `tls: needs sock_type "tcp"`},
		{`{"host":"a","port":1,"flush_limit":4096}`, "flush_limit: is not supported yet"},
		{`{"host":"a","port":1,"pool_size":5}`, "pool_size: is not supported yet"},
		{`{"host":"a","port":1,"x":1}`, "x: unknown field; known fields: " + fields},
	} {
		_, err := Parse(json.RawMessage(tc.raw))
		if got := fmt.Sprint(err); (tc.want == "") != (err == nil) || (err != nil && got != tc.want) {
			t.Errorf("Parse(%s) = %v, want %q", tc.raw, err, tc.want)
		}
	}
}
