package udplogger

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
	if c.Addr != "127.0.0.1:5044" || c.Timeout != 3*time.Second || c.Batch.Name != "udp logger" {
		t.Errorf("defaults = %+v", c)
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"host":"::1","port":1,"timeout":1,"include_req_body":true,"batch_max_size":1}`, ""},
		{`{"port":1}`, "host: required"},
		{`{"host":"a"}`, "port: required"},
		{`{"host":"a","port":70000}`, "port: must be an integer from 1 to 65535, got 70000"},
		{`{"host":"a","port":1,"tls":true}`, "tls: unknown field; known fields: " + fields},
	} {
		_, err := Parse(json.RawMessage(tc.raw))
		if got := fmt.Sprint(err); (tc.want == "") != (err == nil) || (err != nil && got != tc.want) {
			t.Errorf("Parse(%s) = %v, want %q", tc.raw, err, tc.want)
		}
	}
}
